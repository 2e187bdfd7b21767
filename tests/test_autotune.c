/* Profiles and autotuning: evloop_profile_save/load round-trip a profile and refuse every
 * kind of bad input with the documented code; evloop_new starts from a profile (config
 * field or $EVLOOP_PROFILE) for what the config leaves adaptive, while explicit settings
 * win; evloop_autotune returns a sane profile within its time limit. Files go to a fresh
 * directory under /tmp, removed at the end. */
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *path_in(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    char sub[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        if (unlink(sub) != 0)
            remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/evloop-autotune-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    remove_tree(dir);
    return 0;
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static struct evloop_profile sample_profile(const char *backend)
{
    struct evloop_profile p;
    memset(&p, 0, sizeof p);
    p.version = EVLOOP_PROFILE_VERSION;
    p.ncpu = 2;
    snprintf(p.backend, sizeof p.backend, "%s", backend);
    p.spin_ns = 15000;
    p.spin_max_ns = 30000;
    p.batch_budget = 1024;
    p.wake_ns = 30000;
    p.handoff_ns = 400;
    p.readiness_ns[0] = 20000;
    p.readiness_ns[1] = 25000;
    return p;
}

static void assert_profiles_equal(const struct evloop_profile *a, const struct evloop_profile *b)
{
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->ncpu, b->ncpu);
    assert_string_equal(a->backend, b->backend);
    assert_true(a->spin_ns == b->spin_ns);
    assert_true(a->spin_max_ns == b->spin_max_ns);
    assert_int_equal(a->batch_budget, b->batch_budget);
    assert_int_equal(a->wake_ns, b->wake_ns);
    assert_int_equal(a->handoff_ns, b->handoff_ns);
    for (int i = 0; i < 3; i++)
        assert_int_equal(a->readiness_ns[i], b->readiness_ns[i]);
}

/* ---- the file ------------------------------------------------------------------------- */

static void test_a_saved_profile_loads_back_equal(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "round_trip");
    struct evloop_profile p = sample_profile("io_uring"), q;
    p.spin_max_ns = 10000000; /* the limits themselves are valid */
    p.batch_budget = 1u << 20;
    p.wake_ns = 60000000000u;
    assert_rc(evloop_profile_save(&p, path), 0);
    memset(&q, 0xab, sizeof q);
    assert_rc(evloop_profile_load(&q, path), 0);
    assert_profiles_equal(&p, &q);
    /* the file is the formatted text, starting with its header line */
    char text[EVLOOP_PROFILE_TEXT_MAX], file[EVLOOP_PROFILE_TEXT_MAX + 1];
    assert_rc(evloop_profile_format(&p, text, sizeof text), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(file, 1, sizeof file - 1, f);
    fclose(f);
    file[n] = '\0';
    assert_string_equal(file, text);
    assert_memory_equal(text, "# evloop profile\nversion 1\n", 27);
    assert_rc(unlink(path), 0);
}

static void test_save_replaces_the_file_atomically_and_leaves_no_temporary(void **state)
{
    (void)state;
    char sub[128], path[192];
    path_in(sub, sizeof sub, "atomic");
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/profile", sub);
    write_text(path, "old content\n", 12);
    struct evloop_profile p = sample_profile("epoll"), q;
    assert_rc(evloop_profile_save(&p, path), 0);
    p.batch_budget = 64;
    assert_rc(evloop_profile_save(&p, path), 0);
    assert_rc(evloop_profile_load(&q, path), 0);
    assert_int_equal(q.batch_budget, 64);
    DIR *d = opendir(sub);
    assert_non_null(d);
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    assert_int_equal(entries, 1);
    remove_tree(sub);
}

static void test_profile_calls_with_null_arguments_return_einval(void **state)
{
    (void)state;
    char path[128], buf[EVLOOP_PROFILE_TEXT_MAX];
    path_in(path, sizeof path, "null_args");
    struct evloop_profile p = sample_profile("epoll");
    assert_rc(evloop_profile_save(NULL, path), -EINVAL);
    assert_rc(evloop_profile_save(&p, NULL), -EINVAL);
    assert_rc(evloop_profile_load(NULL, path), -EINVAL);
    assert_rc(evloop_profile_load(&p, NULL), -EINVAL);
    assert_rc(evloop_profile_format(NULL, buf, sizeof buf), -EINVAL);
    assert_rc(evloop_profile_format(&p, NULL, sizeof buf), -EINVAL);
    assert_rc(evloop_profile_format(&p, buf, 0), -EINVAL);
    assert_rc(evloop_autotune(NULL, NULL), -EINVAL);
    assert_false(file_exists(path));
}

static void test_a_missing_file_or_directory_is_enoent(void **state)
{
    (void)state;
    char path[128];
    struct evloop_profile p = sample_profile("epoll"), q = p;
    assert_rc(evloop_profile_load(&q, path_in(path, sizeof path, "no_such_file")), -ENOENT);
    assert_profiles_equal(&p, &q); /* untouched */
    assert_rc(evloop_profile_save(&p, path_in(path, sizeof path, "no_such_dir/p")), -ENOENT);
}

static void test_saving_an_invalid_profile_is_einval_and_writes_nothing(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "invalid");
    struct evloop_profile p = sample_profile("epoll");
    p.version = 2;
    assert_rc(evloop_profile_save(&p, path), -EINVAL);
    p = sample_profile("epoll");
    p.spin_ns = p.spin_max_ns + 1;
    assert_rc(evloop_profile_save(&p, path), -EINVAL);
    p = sample_profile("epoll");
    memset(p.backend, 'x', sizeof p.backend); /* not terminated */
    assert_rc(evloop_profile_save(&p, path), -EINVAL);
    assert_false(file_exists(path));
}

static void test_format_into_a_short_buffer_is_enospc(void **state)
{
    (void)state;
    struct evloop_profile p = sample_profile("epoll");
    char buf[40];
    assert_rc(evloop_profile_format(&p, buf, sizeof buf), -ENOSPC);
    assert_string_equal(buf, "");
}

/* The lines of a valid file, after its header. */
static const char *const good_lines[] = {
    "version 1",
    "ncpu 2",
    "backend epoll",
    "spin_ns 15000",
    "spin_max_ns 30000",
    "batch_budget 1024",
    "wake_ns 30000",
    "handoff_ns 400",
    "readiness_epoll_ns 20000",
    "readiness_io_uring_ns 25000",
    "readiness_kqueue_ns 0",
};
#define NGOOD (sizeof good_lines / sizeof good_lines[0])

/* Writes a profile file: the good lines, the one starting with `key ` replaced by `line`
 * (NULL: left out), then `extra` (may be NULL). */
static void write_profile_with(const char *path, const char *key, const char *line,
                               const char *extra)
{
    char text[2048];
    size_t len = (size_t)snprintf(text, sizeof text, "# evloop profile\n");
    for (size_t i = 0; i < NGOOD; i++) {
        const char *l = good_lines[i];
        if (key && strncmp(l, key, strlen(key)) == 0 && l[strlen(key)] == ' ')
            l = line;
        if (l)
            len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", l);
    }
    if (extra)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s", extra);
    write_text(path, text, len);
}

struct bad_case {
    const char *key, *line, *extra;
};

static void expect_each_refused(const struct bad_case *cases, size_t n)
{
    char path[128];
    path_in(path, sizeof path, "bad");
    for (size_t i = 0; i < n; i++) {
        write_profile_with(path, cases[i].key, cases[i].line, cases[i].extra);
        struct evloop_profile p = sample_profile("io_uring"), q = p;
        int r = evloop_profile_load(&q, path);
        if (r != -EINVAL)
            print_error("case %zu: \"%s\" / \"%s\"\n", i, cases[i].line ? cases[i].line : "(none)",
                        cases[i].extra ? cases[i].extra : "");
        assert_rc(r, -EINVAL);
        assert_profiles_equal(&p, &q);
    }
    unlink(path);
}

static void test_a_malformed_number_is_einval(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"spin_ns", "spin_ns 12x", NULL},
        {"spin_ns", "spin_ns", NULL},
        {"spin_ns", "spin_ns 1 2", NULL},
        {"ncpu", "ncpu +2", NULL},
        {"batch_budget", "batch_budget 0x10", NULL},
        {"version", "version 1.0", NULL},
        {"wake_ns", "wake_ns -", NULL},
        {"wake_ns", "wake_ns 99999999999999999999999", NULL},
        {"spin_max_ns", "spin_max_ns 9223372036854775808", NULL},
        {"batch_budget", "batch_budget 4294967296", NULL},
    };
    expect_each_refused(cases, sizeof cases / sizeof cases[0]);
}

static void test_a_missing_required_key_is_einval_and_a_missing_measurement_is_zero(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"version", NULL, NULL}, {"ncpu", NULL, NULL},        {"backend", NULL, NULL},
        {"spin_ns", NULL, NULL}, {"spin_max_ns", NULL, NULL}, {"batch_budget", NULL, NULL},
    };
    expect_each_refused(cases, sizeof cases / sizeof cases[0]);
    char path[128];
    path_in(path, sizeof path, "no_measurements");
    const char *text = "# evloop profile\nversion 1\nncpu 4\nbackend auto\nspin_ns 0\n"
                       "spin_max_ns 0\nbatch_budget 256\n";
    write_text(path, text, strlen(text));
    struct evloop_profile p;
    memset(&p, 0xab, sizeof p);
    assert_rc(evloop_profile_load(&p, path), 0);
    assert_string_equal(p.backend, "auto");
    assert_int_equal(p.ncpu, 4);
    assert_int_equal(p.batch_budget, 256);
    assert_int_equal(p.wake_ns, 0);
    assert_int_equal(p.handoff_ns, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(p.readiness_ns[i], 0);
    unlink(path);
}

static void test_a_wrong_version_or_header_is_einval(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"version", "version 2", NULL},
        {"version", "version 0", NULL},
    };
    expect_each_refused(cases, sizeof cases / sizeof cases[0]);
    char path[128];
    path_in(path, sizeof path, "header");
    static const char *const texts[] = {
        "",
        "version 1\n",
        "# evloop profil\nversion 1\n",
        "\n# evloop profile\nversion 1\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        write_text(path, texts[i], strlen(texts[i]));
        struct evloop_profile p;
        assert_rc(evloop_profile_load(&p, path), -EINVAL);
    }
    /* a NUL byte, and a file far too big to be a profile */
    write_text(path, "# evloop profile\nversion 1\0\n", 28);
    struct evloop_profile p;
    assert_rc(evloop_profile_load(&p, path), -EINVAL);
    char *big = malloc(100000);
    assert_non_null(big);
    memset(big, '#', 100000);
    write_text(path, big, 100000);
    free(big);
    assert_rc(evloop_profile_load(&p, path), -EINVAL);
    unlink(path);
}

static void test_a_value_out_of_range_or_a_key_given_twice_is_einval(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"spin_ns", "spin_ns 40000", NULL}, /* above spin_max_ns */
        {"spin_ns", "spin_ns -1", NULL},
        {"spin_max_ns", "spin_max_ns 20000000", NULL}, /* above 10 ms */
        {"batch_budget", "batch_budget 0", NULL},
        {"batch_budget", "batch_budget 2000000", NULL},
        {"ncpu", "ncpu 0", NULL},
        {"backend", "backend iocp", NULL},
        {"backend", "backend epoll_and_more_text", NULL},
        {"wake_ns", "wake_ns 100000000000", NULL}, /* above 60 s */
        {NULL, NULL, "spin_ns 1000\n"},            /* twice */
    };
    expect_each_refused(cases, sizeof cases / sizeof cases[0]);
}

static void test_unknown_keys_comments_blanks_and_crlf_are_accepted(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "lenient");
    const char *text = "# evloop profile\r\n"
                       "# measured on a test machine\r\n"
                       "\r\n"
                       "version 1\r\n"
                       "  ncpu\t2  \r\n"
                       "future_key some words here\r\n"
                       "backend io_uring\r\n"
                       "spin_ns 100\r\n"
                       "spin_max_ns 200\r\n"
                       "batch_budget 64"; /* no final newline */
    write_text(path, text, strlen(text));
    struct evloop_profile p;
    assert_rc(evloop_profile_load(&p, path), 0);
    assert_int_equal(p.ncpu, 2);
    assert_string_equal(p.backend, "io_uring");
    assert_true(p.spin_ns == 100 && p.spin_max_ns == 200);
    assert_int_equal(p.batch_budget, 64);
    unlink(path);
}

/* ---- evloop_new from a profile ------------------------------------------------------------ */

/* The environment a test changes, put back by env_restore(). */
struct saved_env {
    char backend[64], profile[256];
    bool had_backend, had_profile;
};

static struct saved_env env_save(void)
{
    struct saved_env s;
    memset(&s, 0, sizeof s);
    const char *b = getenv("EVLOOP_BACKEND"), *p = getenv("EVLOOP_PROFILE");
    if ((s.had_backend = b != NULL))
        snprintf(s.backend, sizeof s.backend, "%s", b);
    if ((s.had_profile = p != NULL))
        snprintf(s.profile, sizeof s.profile, "%s", p);
    return s;
}

static void env_restore(const struct saved_env *s)
{
    if (s->had_backend)
        setenv("EVLOOP_BACKEND", s->backend, 1);
    else
        unsetenv("EVLOOP_BACKEND");
    if (s->had_profile)
        setenv("EVLOOP_PROFILE", s->profile, 1);
    else
        unsetenv("EVLOOP_PROFILE");
}

static const char *const all_backends[] = {"epoll", "io_uring", "kqueue"};

/* True when a loop on this backend starts here. */
static bool backend_starts(const char *name)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = name;
    cfg.profile = "";
    evloop *loop = NULL;
    if (evloop_new(&loop, &cfg) != 0)
        return false;
    bool same = strcmp(evloop_backend(loop), name) == 0;
    evloop_free(loop);
    return same;
}

static evloop *new_loop_with_profile(const char *path, const char *backend)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.profile = path;
    cfg.backend = backend;
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), 0);
    assert_non_null(loop);
    return loop;
}

static struct evloop_stats stats_of(const evloop *loop)
{
    struct evloop_stats st;
    memset(&st, 0, sizeof st);
    assert_rc(evloop_stats(loop, &st), 0);
    return st;
}

static void test_new_with_a_profile_starts_from_its_spin_budget_and_backend(void **state)
{
    (void)state;
    struct saved_env env = env_save();
    unsetenv("EVLOOP_BACKEND");
    char path[128];
    path_in(path, sizeof path, "apply");
    int started = 0;
    for (int i = 0; i < 3; i++) {
        if (!backend_starts(all_backends[i]))
            continue;
        started++;
        struct evloop_profile p = sample_profile(all_backends[i]);
        assert_rc(evloop_profile_save(&p, path), 0);
        evloop *loop = new_loop_with_profile(path, NULL);
        struct evloop_stats st = stats_of(loop);
        assert_true(st.profile_loaded);
        assert_int_equal(st.batch_budget, 1024);
        assert_true(st.spin_ns == 15000);
        assert_string_equal(evloop_backend(loop), all_backends[i]);
        assert_string_equal(st.fallback, "");
        test_loop_free(loop);
    }
    env_restore(&env);
    assert_true(started >= 1);
    struct evloop_stats st;
    evloop *plain = new_loop_with_profile("", NULL);
    st = stats_of(plain);
    assert_false(st.profile_loaded);
    test_loop_free(plain);
    unlink(path);
}

static void test_a_profile_budget_is_fitted_into_the_adaptive_range(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "budget");
    static const unsigned given[] = {1, 64, 100, 1000, 4096, 5000, 1u << 20};
    static const unsigned fitted[] = {64, 64, 64, 512, 4096, 4096, 4096};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        struct evloop_profile p = sample_profile("auto");
        p.batch_budget = given[i];
        assert_rc(evloop_profile_save(&p, path), 0);
        evloop *loop = new_loop_with_profile(path, NULL);
        assert_int_equal(stats_of(loop).batch_budget, fitted[i]);
        test_loop_free(loop);
    }
    unlink(path);
}

static void test_explicit_settings_win_over_the_profile(void **state)
{
    (void)state;
    struct saved_env env = env_save();
    const char *want = NULL, *other = NULL; /* two backends that start here, if there are */
    for (int i = 0; i < 3; i++) {
        if (!backend_starts(all_backends[i]))
            continue;
        if (!want)
            want = all_backends[i];
        else if (!other)
            other = all_backends[i];
    }
    assert_non_null(want);
    if (!other)
        other = want;
    char path[128];
    path_in(path, sizeof path, "explicit");
    struct evloop_profile p = sample_profile(other);
    assert_rc(evloop_profile_save(&p, path), 0);
    /* the config's own values */
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.profile = path;
    cfg.backend = want;
    cfg.spin_ns = 0;
    cfg.batch_budget = 64;
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), 0);
    struct evloop_stats st = stats_of(loop);
    assert_true(st.profile_loaded);
    assert_int_equal(st.batch_budget, 64);
    assert_true(st.spin_ns == 0);
    assert_string_equal(evloop_backend(loop), want);
    test_loop_free(loop);
    /* $EVLOOP_BACKEND is an explicit choice too */
    setenv("EVLOOP_BACKEND", want, 1);
    loop = new_loop_with_profile(path, "auto");
    assert_string_equal(evloop_backend(loop), want);
    assert_int_equal(stats_of(loop).batch_budget, 1024); /* the rest still from the profile */
    test_loop_free(loop);
    env_restore(&env);
    unlink(path);
}

static void test_a_profile_backend_that_cannot_start_falls_back_to_auto(void **state)
{
    (void)state;
    const char *missing = NULL;
    for (int i = 0; i < 3 && !missing; i++)
        if (!backend_starts(all_backends[i]))
            missing = all_backends[i];
    if (!missing) {
        print_message("# every backend starts here: nothing to fall back from\n");
        return;
    }
    struct saved_env env = env_save();
    unsetenv("EVLOOP_BACKEND");
    char path[128];
    path_in(path, sizeof path, "fallback");
    struct evloop_profile p = sample_profile(missing);
    assert_rc(evloop_profile_save(&p, path), 0);
    evloop *loop = new_loop_with_profile(path, NULL);
    env_restore(&env);
    struct evloop_stats st = stats_of(loop);
    assert_string_not_equal(evloop_backend(loop), missing);
    assert_true(st.profile_loaded);
    assert_non_null(strstr(st.fallback, missing));
    test_loop_free(loop);
    unlink(path);
}

static void test_the_evloop_profile_variable_is_honoured_unless_the_config_names_one(void **state)
{
    (void)state;
    struct saved_env env = env_save();
    char path[128], missing[128];
    path_in(path, sizeof path, "from_env");
    path_in(missing, sizeof missing, "no_such_profile");
    struct evloop_profile p = sample_profile("auto");
    p.batch_budget = 2048;
    assert_rc(evloop_profile_save(&p, path), 0);
    setenv("EVLOOP_PROFILE", path, 1);
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, NULL), 0);
    assert_true(stats_of(loop).profile_loaded);
    assert_int_equal(stats_of(loop).batch_budget, 2048);
    test_loop_free(loop);
    /* "" in the config: no profile at all */
    loop = new_loop_with_profile("", NULL);
    assert_false(stats_of(loop).profile_loaded);
    test_loop_free(loop);
    /* a broken variable fails evloop_new, with the load's code */
    setenv("EVLOOP_PROFILE", missing, 1);
    loop = (evloop *)&loop;
    assert_rc(evloop_new(&loop, NULL), -ENOENT);
    assert_null(loop);
    /* an empty variable is no profile */
    setenv("EVLOOP_PROFILE", "", 1);
    assert_rc(evloop_new(&loop, NULL), 0);
    assert_false(stats_of(loop).profile_loaded);
    test_loop_free(loop);
    env_restore(&env);
    unlink(path);
}

static void test_a_bad_profile_fails_evloop_new_and_leaks_nothing(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "bad_for_new");
    write_profile_with(path, "batch_budget", "batch_budget lots", NULL);
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.profile = path;
    evloop *loop = (evloop *)&cfg;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    assert_null(loop);
    cfg.profile = path_in(path, sizeof path, "absent");
    assert_rc(evloop_new(&loop, &cfg), -ENOENT);
    assert_null(loop);
    unlink(path_in(path, sizeof path, "bad_for_new"));
}

/* ---- the spin cap of a profile --------------------------------------------------------- */

struct gaps {
    evloop *loop;
    int64_t cap, max_seen;
};

/* Hands the running loop 40 tasks with short gaps (the adaptive rule widens the window after
 * short sleeps) and records the widest spin window seen. */
static void hand_over_with_gaps(struct gaps *g)
{
    test_counter ran = 0;
    for (int i = 0; i < 40; i++) {
        assert_rc(evloop_submit(g->loop, test_count_task, &ran), 0);
        assert_true(wait_for_count(&ran, (uint64_t)i + 1));
        struct timespec ts = {0, 20000 + 5000 * (i % 8)};
        nanosleep(&ts, NULL);
        struct evloop_stats st = stats_of(g->loop);
        if (st.spin_ns > g->max_seen)
            g->max_seen = st.spin_ns;
    }
}

static void test_a_profile_caps_the_adaptive_spin_window(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "spin_cap");
    static const int64_t caps[] = {0, 2000};
    for (size_t i = 0; i < 2; i++) {
        struct evloop_profile p = sample_profile("auto");
        p.spin_max_ns = caps[i];
        p.spin_ns = caps[i] / 2;
        assert_rc(evloop_profile_save(&p, path), 0);
        evloop_config cfg;
        evloop_config_init(&cfg);
        cfg.profile = path;
        evloop *loop = test_loop_new(&cfg); /* on this entry's backend */
        struct test_runner r;
        test_runner_start(&r, loop);
        struct gaps g = {.loop = loop, .cap = caps[i], .max_seen = 0};
        hand_over_with_gaps(&g);
        test_runner_stop(&r);
        struct evloop_stats st = stats_of(loop);
        assert_true(g.max_seen <= caps[i]);
        if (caps[i] == 0)
            assert_int_equal(st.spin_hits + st.spin_misses, 0); /* never spun */
        test_loop_free(loop);
    }
    unlink(path);
}

/* ---- evloop_autotune ------------------------------------------------------------------------ */

static void test_autotune_rejects_bad_options(void **state)
{
    (void)state;
    struct evloop_profile p;
    const double bad[] = {-1.0, -0.001, NAN, INFINITY, 1e9};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct evloop_autotune_options opt = {.max_seconds = bad[i], .save_path = NULL};
        assert_rc(evloop_autotune(&p, &opt), -EINVAL);
    }
}

static void test_autotune_measures_a_sane_profile_within_its_time_limit(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "tuned");
    struct evloop_autotune_options opt = {.max_seconds = 0.3, .save_path = path};
    struct evloop_profile p;
    memset(&p, 0, sizeof p);
    uint64_t t0 = evloop_now_ns();
    assert_rc(evloop_autotune(&p, &opt), 0);
    double took = (double)(evloop_now_ns() - t0) / 1e9;
    print_message("# autotune took %.3f s: backend %s, spin %lld/%lld ns, budget %u, wake %llu ns,"
                  " handoff %llu ns\n",
                  took, p.backend, (long long)p.spin_ns, (long long)p.spin_max_ns, p.batch_budget,
                  (unsigned long long)p.wake_ns, (unsigned long long)p.handoff_ns);
    /* Generous: the machine is shared. Valgrind runs one thread at a time, and a producer
     * waiting for the loop thread then waits for its time slice. */
    assert_true(took < (RUNNING_ON_VALGRIND ? 10 : 4) * opt.max_seconds);
    assert_int_equal(p.version, EVLOOP_PROFILE_VERSION);
    assert_true(p.ncpu >= 1);
    assert_true(p.spin_max_ns >= 0 && p.spin_max_ns <= 200000);
    assert_true(p.spin_ns >= 0 && p.spin_ns <= p.spin_max_ns);
    if (p.ncpu == 1)
        assert_true(p.spin_max_ns == 0);
    assert_true(p.batch_budget == 64 || p.batch_budget == 256 || p.batch_budget == 1024 ||
                p.batch_budget == 4096);
    assert_true(p.wake_ns > 0);
    assert_true(p.ncpu == 1 || p.handoff_ns > 0);
    /* the backend chosen is one that starts here and was measured; the others read 0 */
    assert_true(backend_starts(p.backend));
    for (int i = 0; i < 3; i++) {
        if (strcmp(p.backend, all_backends[i]) == 0)
            assert_true(p.readiness_ns[i] > 0);
        if (!backend_starts(all_backends[i]))
            assert_int_equal(p.readiness_ns[i], 0);
    }
    /* saved as asked, and a loop starts from it */
    struct evloop_profile q;
    assert_rc(evloop_profile_load(&q, path), 0);
    assert_profiles_equal(&p, &q);
    evloop *loop = new_loop_with_profile(path, NULL);
    assert_true(stats_of(loop).profile_loaded);
    test_loop_free(loop);
    unlink(path);
}

static void test_autotune_with_a_bad_save_path_fills_the_profile_and_reports_the_error(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "no_such_dir/tuned");
    struct evloop_autotune_options opt = {.max_seconds = 0.05, .save_path = path};
    struct evloop_profile p;
    memset(&p, 0, sizeof p);
    assert_rc(evloop_autotune(&p, &opt), -ENOENT);
    assert_int_equal(p.version, EVLOOP_PROFILE_VERSION);
    assert_true(p.backend[0] != '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_saved_profile_loads_back_equal),
        cmocka_unit_test(test_save_replaces_the_file_atomically_and_leaves_no_temporary),
        cmocka_unit_test(test_profile_calls_with_null_arguments_return_einval),
        cmocka_unit_test(test_a_missing_file_or_directory_is_enoent),
        cmocka_unit_test(test_saving_an_invalid_profile_is_einval_and_writes_nothing),
        cmocka_unit_test(test_format_into_a_short_buffer_is_enospc),
        cmocka_unit_test(test_a_malformed_number_is_einval),
        cmocka_unit_test(test_a_missing_required_key_is_einval_and_a_missing_measurement_is_zero),
        cmocka_unit_test(test_a_wrong_version_or_header_is_einval),
        cmocka_unit_test(test_a_value_out_of_range_or_a_key_given_twice_is_einval),
        cmocka_unit_test(test_unknown_keys_comments_blanks_and_crlf_are_accepted),
        cmocka_unit_test(test_new_with_a_profile_starts_from_its_spin_budget_and_backend),
        cmocka_unit_test(test_a_profile_budget_is_fitted_into_the_adaptive_range),
        cmocka_unit_test(test_explicit_settings_win_over_the_profile),
        cmocka_unit_test(test_a_profile_backend_that_cannot_start_falls_back_to_auto),
        cmocka_unit_test(test_the_evloop_profile_variable_is_honoured_unless_the_config_names_one),
        cmocka_unit_test(test_a_bad_profile_fails_evloop_new_and_leaks_nothing),
        cmocka_unit_test(test_a_profile_caps_the_adaptive_spin_window),
        cmocka_unit_test(test_autotune_rejects_bad_options),
        cmocka_unit_test(test_autotune_measures_a_sane_profile_within_its_time_limit),
        cmocka_unit_test(
            test_autotune_with_a_bad_save_path_fills_the_profile_and_reports_the_error),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("autotune", tests, make_dir, remove_dir);
}
