/* cmd_plan.c — `bigmac plan` (placeholder until the planner lands in this session). */
#include <stdio.h>
#include "cli/cli.h"
int bm_cmd_plan(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "plan: not built yet\n"); return 1; }
