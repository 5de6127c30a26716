/* cmd_verify.c — `bigmac verify` (placeholder until the verifier lands in this session). */
#include <stdio.h>
#include "cli/cli.h"
int bm_cmd_verify(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "verify: not built yet\n"); return 1; }
