#include "report/report.h"
int bm_render_svg(const struct bm_table *t, const struct bm_timeline *tl, const char *title, FILE *f)
{ (void)t; (void)tl; (void)title; (void)f; return BM_ERR; }
