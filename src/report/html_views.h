/* html_views.h — the parts of the HTML report that show more than one timeline: the policy
 * timelines stacked on one time scale and the compute/memory frontier chart (an SVG scatter:
 * hover shows a point's configuration, click draws its timeline), and the critical path's
 * summary. Private to src/report (html.c calls these). */
#ifndef BM_REPORT_HTML_VIEWS_H
#define BM_REPORT_HTML_VIEWS_H

#include <stdio.h>

#include "report/critical.h"
#include "report/report.h"

/* Extra style rules (inside <style>). */
void bm_html_views_css(FILE *f);
/* The "Critical path" section: the split of the path's length. */
void bm_html_critical_section(FILE *f, const struct bm_critical *c);
/* The sections "Policy timelines" and "Compute/memory frontier" (nothing without cmp). */
void bm_html_views_body(FILE *f, const struct bm_report_compare *cmp);
/* <script> with `const V = {...}` (the timelines drawn there) and the code drawing them;
 * nothing without cmp. */
void bm_html_views_script(FILE *f, const struct bm_report_compare *cmp);

/* "Simulated against measured": the makespans, the deviation per module and pass, the canvas;
 * and its script (the measured and the simulated timeline, the simulated one with per-op
 * deviations). sim is a timeline of the same table as meas. */
void bm_html_vs_body(FILE *f, const struct bm_table *t, const struct bm_timeline *meas, const struct bm_timeline *sim);
void bm_html_vs_script(FILE *f, const struct bm_table *t, const struct bm_timeline *meas, const struct bm_timeline *sim);

#endif
