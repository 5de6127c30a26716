/* test_jpos.c — the JSON path -> line:column locator used by every loader's diagnostics. */
#include "test.h"
#include "spec/jpos.h"
#include "util/util.h"

/* Expect path found at (l, c). */
#define AT(text, path, l, c)                                                         \
    do {                                                                             \
        int gl_ = -7, gc_ = -7;                                                      \
        int rc_ = bm_jpos_find((text), (path), &gl_, &gc_);                          \
        CHECKF(rc_ == 0 && gl_ == (l) && gc_ == (c), "%s: rc %d at %d:%d, wanted %d:%d", \
               (path), rc_, gl_, gc_, (l), (c));                                     \
    } while (0)

/* Expect path not found, nearest enclosing element at (l, c). */
#define MISS(text, path, l, c)                                                       \
    do {                                                                             \
        int gl_ = -7, gc_ = -7;                                                      \
        int rc_ = bm_jpos_find((text), (path), &gl_, &gc_);                          \
        CHECKF(rc_ == -1 && gl_ == (l) && gc_ == (c), "%s: rc %d at %d:%d, wanted miss at %d:%d", \
               (path), rc_, gl_, gc_, (l), (c));                                     \
    } while (0)

TEST(root_and_top_level_keys)
{
    const char *t = "\n  {\"a\": 1,\n   \"bb\" : {\"c\": [1, 2]}}";
    AT(t, "", 2, 3);
    AT(t, "a", 2, 4);
    AT(t, "bb", 3, 4);
    AT(t, "bb.c", 3, 12);
    AT(t, "bb.c[0]", 3, 18);
    AT(t, "bb.c[1]", 3, 21);
}

TEST(nested_arrays_and_objects)
{
    const char *t =
        "{\"modules\": [\n"
        "  {\"name\": \"vit\", \"cost\": {\"fwd_ms\": 4}},\n"
        "  {\"name\": \"llm\", \"cost\": {\"bwd_ms\": 8, \"fwd_ms\": 40}},\n"
        "  [[1, 2], [3, {\"x\": [4]}]]\n"
        "]}";
    AT(t, "modules", 1, 2);
    AT(t, "modules[0]", 2, 3);
    AT(t, "modules[0].cost.fwd_ms", 2, 28);
    AT(t, "modules[1].cost.fwd_ms", 3, 41);
    AT(t, "modules[1].name", 3, 4);
    AT(t, "modules[2][1][1].x[0]", 4, 23);
    AT(t, "modules[2][1][0]", 4, 13);
}

TEST(strings_with_escapes_and_brackets_are_skipped)
{
    const char *t = "{\"doc\": \"a \\\"quoted\\\" } ] [ { , : text\\\\\", \"k\": [\"]\", \"[\", \"\\\"\"], \"z\": 3}";
    AT(t, "z", 1, 67);
    AT(t, "k[2]", 1, 60);
    /* a key that itself holds an escaped quote, brackets and dots: quoted path segment */
    const char *u = "{\"we\\\"ird.k[0]\": {\"in\": 1}}";
    AT(u, "[\"we\\\"ird.k[0]\"].in", 1, 19);
    AT(u, "[\"we\\\"ird.k[0]\"]", 1, 2);
}

TEST(unicode_columns_count_code_points)
{
    /* "é" is 2 bytes, "€" 3, "😀" 4: each is one column */
    const char *t = "{\"caf\xc3\xa9\": \"\xe2\x82\xac\xf0\x9f\x98\x80\", \"x\": 1}";
    AT(t, "x", 1, 16);
    AT(t, "caf\xc3\xa9", 1, 2);
    /* escaped spellings of the same key are found by the UTF-8 path */
    const char *u = "{\"a\": 0, \"caf\\u00e9\": 1, \"\\ud83d\\ude00\": 2, \"tab\\tkey\": 3}";
    AT(u, "[\"caf\xc3\xa9\"]", 1, 10);
    AT(u, "[\"\xf0\x9f\x98\x80\"]", 1, 26);
    AT(u, "[\"tab\tkey\"]", 1, 45);
}

TEST(line_endings_and_tabs)
{
    const char *t = "{\r\n\t\"a\":\r\n\t[\r\n\t\t7]}";
    AT(t, "a", 2, 2);
    AT(t, "a[0]", 4, 3);
}

TEST(not_found_reports_nearest_enclosing)
{
    const char *t = "{\n  \"parallel\": {\"pp\": 4},\n  \"m\": [1, 2]\n}";
    MISS(t, "parallel.vpp", 2, 3);
    MISS(t, "nope", 1, 1);
    MISS(t, "m[2]", 3, 3);
    MISS(t, "m[0].x", 3, 9);   /* m[0] is a number, not an object */
    MISS(t, "parallel[0]", 2, 3);
    MISS("", "", 1, 1);
    MISS("   ", "a", 1, 1);
    MISS(NULL, "a", 1, 1);
    MISS("{}", "a", 1, 1);
    MISS("[]", "[0]", 1, 1);
}

TEST(malformed_text_and_paths_do_not_crash)
{
    const char *bad[] = {"{\"a\": [1, 2", "{\"a\" 1}", "{\"a\": \"unterminated", "{\"a\": 1 \"b\": 2}",
                         "[1,,2]", "{\"a\": \"\\u12\"}", "{\"a\\", "}", "{\"a\": {\"b\": ]}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int l, c;
        (void)bm_jpos_find(bad[i], "a.b[3].c", &l, &c);
        (void)bm_jpos_find(bad[i], "b", &l, &c);
        CHECK(l >= 1 && c >= 1);
    }
    const char *t = "{\"a\": [1]}";
    int l, c;
    CHECK(bm_jpos_find(t, "a..b", &l, &c) == -1);
    CHECK(bm_jpos_find(t, "a[x]", &l, &c) == -1);
    CHECK(bm_jpos_find(t, "a[0", &l, &c) == -1);
    CHECK(bm_jpos_find(t, "[\"a", &l, &c) == -1);
    CHECK(bm_jpos_find(t, "a[99999999999999999999]", &l, &c) == -1);
    CHECK(bm_jpos_find(t, "a", NULL, NULL) == 0);
}

TEST(duplicate_key_first_wins)
{
    AT("{\"a\": 1, \"a\": 2}", "a", 1, 2);
}

TEST(path_builders_round_trip)
{
    char p[64] = "";
    CHECK(bm_jpos_key(p, sizeof p, "modules") == 0);
    CHECK(bm_jpos_index(p, sizeof p, 1) == 0);
    CHECK(bm_jpos_key(p, sizeof p, "cost") == 0);
    CHECK(bm_jpos_key(p, sizeof p, "we\"ird.k") == 0);
    CHECK(!strcmp(p, "modules[1].cost[\"we\\\"ird.k\"]"));
    const char *t = "{\"modules\": [0, {\"cost\": {\"we\\\"ird.k\": 5}}]}";
    AT(t, p, 1, 27);
    char small[8] = "abc";
    CHECK(bm_jpos_key(small, sizeof small, "defgh") == -1);
    CHECK(!strcmp(small, "abc"));
    CHECK(bm_jpos_index(small, sizeof small, 12345) == -1);
    CHECK(bm_jpos_key(small, sizeof small, "d") == 0);
    CHECK(!strcmp(small, "abc.d"));
    char e[16] = "";
    CHECK(bm_jpos_key(e, sizeof e, "") == 0);
    CHECK(!strcmp(e, "[\"\"]"));
    AT("{\"\": 1}", e, 1, 2);
}

TEST(depth_limit)
{
    int l, c;
    CHECK(bm_jpos_depth("{\"a\": [[1]]}", 3, &l, &c) == 0);
    CHECK(bm_jpos_depth("{\"a\": [[1]]}", 2, &l, &c) == -1);
    CHECK(l == 1 && c == 8);
    /* brackets inside strings do not count */
    CHECK(bm_jpos_depth("[\"[[[[[[\", {\"]\": 1}]", 2, &l, &c) == 0);
    char deep[300];
    int n = 0;
    for (int i = 0; i < 100; i++) deep[n++] = '[';
    deep[n] = 0;
    CHECK(bm_jpos_depth(deep, 64, &l, &c) == -1);
    CHECK(l == 1 && c == 65);
}

TEST(offset_to_position)
{
    int l, c;
    bm_jpos_offset("ab\ncd\xc3\xa9x", 7, &l, &c);
    CHECK(l == 2 && c == 4);
    bm_jpos_offset("ab", 100, &l, &c);
    CHECK(l == 1 && c == 3);
}

/* Random texts built from JSON-ish bytes and random paths: never a crash or an overread
 * (asan), positions always >= 1, and found paths point into the text. */
TEST(random_texts_and_paths)
{
    struct bm_rng r;
    bm_rng_seed(&r, 7);
    const char *alpha = "{}[]\",:\\ \n\tab0u\xc3\xa9.";
    const char *seg[] = {"a", ".a", ".b", "[0]", "[1]", "[\"a\"]", "[\"\\\"\"]", ".", "[", "x"};
    char text[64], path[64];
    for (int it = 0; it < 20000; it++) {
        int n = (int)(bm_rng_next(&r) % 40);
        for (int i = 0; i < n; i++) text[i] = alpha[bm_rng_next(&r) % strlen(alpha)];
        text[n] = 0;
        path[0] = 0;
        int k = (int)(bm_rng_next(&r) % 4);
        for (int i = 0; i < k; i++) strcat(path, seg[bm_rng_next(&r) % 10]);
        int l = 0, c = 0;
        int rc = bm_jpos_find(text, path, &l, &c);
        CHECK(l >= 1 && c >= 1 && l <= n + 1 && c <= n + 1);
        CHECK(rc == 0 || rc == -1);
        (void)bm_jpos_depth(text, 2, &l, &c);
        CHECK(l >= 1 && c >= 1);
    }
}

TEST(json_parse_wrapper)
{
    struct bm_err err;
    json_t *j = bm_json_parse("{\"a\": [1, 2]}", "x.json", 64, JSON_REJECT_DUPLICATES, &err);
    CHECK(j && json_is_array(json_object_get(j, "a")));
    json_decref(j);
    CHECK(bm_json_parse("{\"a\": 1,\n \"a\": 2}", "x.json", 64, JSON_REJECT_DUPLICATES, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "x.json:2:");
    CHECK_STR_CONTAINS(err.msg, "invalid JSON: duplicate object key");
    CHECK(bm_json_parse("[[[1]]]", "x.json", 2, 0, &err) == NULL);
    CHECK(!strcmp(err.msg, "x.json:1:3: JSON nested deeper than 2 levels (a guard against absurd input)"));
    /* every allocation failure is reported, never a silently damaged document */
    const char *t = "{\"doc\": \"a string long enough to make jansson grow its lexer buffer more than "
                    "once, once, once, once, once\", \"k\": [1, 2, {\"x\": 3}]}";
    int n;
    for (n = 1; n < 1000; n++) {
        bm_alloc_fail_at(n);
        j = bm_json_parse(t, "x.json", 64, 0, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (j) {
            CHECK(!fired);
            CHECK(json_string_length(json_object_get(j, "doc")) == 97);
            json_decref(j);
            break;
        }
        CHECKF(fired && !strcmp(err.msg, "x.json: out of memory while parsing JSON"), "n=%d: %s", n, err.msg);
    }
    CHECK(n > 3 && n < 1000);
}

int main(void)
{
    RUN(root_and_top_level_keys);
    RUN(nested_arrays_and_objects);
    RUN(strings_with_escapes_and_brackets_are_skipped);
    RUN(unicode_columns_count_code_points);
    RUN(line_endings_and_tabs);
    RUN(not_found_reports_nearest_enclosing);
    RUN(malformed_text_and_paths_do_not_crash);
    RUN(duplicate_key_first_wins);
    RUN(path_builders_round_trip);
    RUN(depth_limit);
    RUN(offset_to_position);
    RUN(random_texts_and_paths);
    RUN(json_parse_wrapper);
    return test_summary();
}
