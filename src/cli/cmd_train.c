/* cmd_train.c — `bigmac train`: see train_main.c (bm_train_main, public so that programs with
 * custom modules share the entry point). */
#include "cli/cli.h"

int bm_cmd_train(int argc, char **argv) { return bm_train_main(argc, argv); }
