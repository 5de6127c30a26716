/* jpos.h — TEMPORARY stub on main until the spec branch (real locator) merges. */
#ifndef BM_JPOS_H
#define BM_JPOS_H
int bm_jpos_find(const char *text, const char *path, int *line, int *col);
#endif
