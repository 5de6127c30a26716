#include "report/report.h"
int bm_render_html(const struct bm_table *t, const struct bm_timeline *tl, const struct bm_report_compare *cmp, const char *title, FILE *f)
{ (void)t; (void)tl; (void)cmp; (void)title; (void)f; return BM_ERR; }
