/* main.c — bin/bigmac: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"plan", bm_cmd_plan, "spec -> operator table for a backbone schedule and nesting policy"},
    {"train", bm_cmd_train, "train the spec's model pipelined (mpirun; --local, --reference: single process)"},
    {"calibrate", bm_cmd_calibrate, "executor trace -> measured spec costs for the simulator"},
    {"verify", bm_cmd_verify, "check a table: counts, deadlock freedom, dependencies, order, residency"},
    {"simulate", bm_cmd_simulate, "plan + simulate: makespan, bubbles, memory, OOM (--compare: every policy)"},
    {"sweep", bm_cmd_sweep, "simulate every pp/vpp/microbatches/policy combination, rank by throughput"},
    {"render", bm_cmd_render, "draw a schedule: ascii, svg, html report, Chrome trace, csv"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: bigmac <command> [args]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-10s %s\n", "version", "the version and the spec/table/trace format versions (also --version)");
    fprintf(f, "\n`bigmac <command> --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return BM_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        if (argc > 2) {
            fprintf(stderr, "bigmac: error: %s takes no arguments (got '%s')\n", argv[1], argv[2]);
            return BM_USAGE;
        }
        printf("bigmac %s\n", bm_version());
        printf("spec format:  \"%s\" version %d\n", BM_SPEC_FORMAT, BM_SPEC_VERSION);
        printf("table format: \"%s\" version %d\n", BM_TABLE_FORMAT, BM_TABLE_VERSION);
        printf("trace format: \"%s\" version %d\n", BM_TRACE_FORMAT, BM_TRACE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "bigmac: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return BM_USAGE;
}
