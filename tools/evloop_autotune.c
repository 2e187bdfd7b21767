/* evloop_autotune: the command-line face of evloop_autotune(), a tool built and installed
 * with the library (tools/CMakeLists.txt). Calibrates this machine, prints the profile (the
 * text a profile file holds) on stdout, and saves it with --out; a loop then starts from it
 * through evloop_config.profile or $EVLOOP_PROFILE, and the benchmark through
 * EVLOOP_BENCH_EVLOOP_CONFIGS='profile=FILE' (targets tagged @tuned).
 *
 *   evloop_autotune [--seconds S] [--out FILE]
 *
 * Exit status: 0, 1 when the calibration or the save failed, 2 for a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evloop.h"

static int usage(FILE *to)
{
    fprintf(to, "usage: evloop_autotune [--seconds S] [--out FILE]\n"
                "  --seconds S  time limit of the calibration (default about 2 s)\n"
                "  --out FILE   save the profile there (EVLOOP_PROFILE=FILE then uses it)\n");
    return to == stdout ? 0 : 2;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0 && v <= 3600))
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    struct evloop_autotune_options opt = {.max_seconds = 0, .save_path = NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return usage(stdout);
        if (i + 1 >= argc)
            return usage(stderr);
        if (strcmp(a, "--seconds") == 0) {
            if (!parse_seconds(argv[++i], &opt.max_seconds)) {
                fprintf(stderr, "evloop_autotune: --seconds wants 0 to 3600, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--out") == 0) {
            opt.save_path = argv[++i];
        } else {
            return usage(stderr);
        }
    }
    struct evloop_profile p;
    memset(&p, 0, sizeof(p));
    int r = evloop_autotune(&p, &opt);
    if (r < 0 && !(opt.save_path && p.version == EVLOOP_PROFILE_VERSION)) {
        fprintf(stderr, "evloop_autotune: %s\n", evloop_strerror(r));
        return 1;
    }
    char text[EVLOOP_PROFILE_TEXT_MAX];
    int f = evloop_profile_format(&p, text, sizeof(text));
    if (f < 0) {
        fprintf(stderr, "evloop_autotune: %s\n", evloop_strerror(f));
        return 1;
    }
    fputs(text, stdout);
    if (r < 0) {
        fprintf(stderr, "evloop_autotune: saving %s: %s\n", opt.save_path, strerror(-r));
        return 1;
    }
    if (opt.save_path)
        fprintf(stderr, "evloop_autotune: saved to %s\n", opt.save_path);
    return 0;
}
