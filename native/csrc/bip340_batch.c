/*
 * BIP-340 batch verification for snap-spark's native core.
 *
 * libsecp256k1 checks one signature at a time through its public API. Its field and group
 * arithmetic, wNAF and precomputed tables of multiples of G are not public, so this file is
 * compiled against the library's own source, the copy the `secp256k1-sys` crate builds: it
 * includes the internal headers (every function in them is `static`, so nothing here
 * clashes with that crate's symbols) and shares the G tables at link time. native/build.rs
 * finds the source.
 *
 * The check (BIP-340, "Batch Verification"): for signatures (r_i, s_i) on messages m_i
 * under x-only keys P_i, with challenges e_i and random weights a_i (a_0 = 1),
 *
 *     (sum a_i s_i) G  =  sum a_i R_i  +  sum_k (sum_{i: P_i = k} a_i e_i) P_k
 *
 * where R_i is the point with x = r_i and an even y. Signatures under the same key share
 * one point in the sum, so a batch of n signatures by k agents costs n + k points; each
 * key's multiples are computed once and kept between batches (snap_bip340_key_table).
 * Every valid batch passes; a batch holding an invalid signature passes with a
 * probability of about 2^-128 over the weights. The caller (check.rs) re-checks a failed
 * batch in halves and finally one signature at a time, so a failed batch never decides a
 * verdict by itself.
 *
 * The prefix `rustsecp256k1_v0_14_` is the one secp256k1-sys 0.14 renames the library's
 * symbols with; build.rs passes it as SNAP_SECP and the names below are built from it.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assumptions.h"
#include "util.h"
#include "field_impl.h"
#include "scalar_impl.h"
#include "group_impl.h"
#include "int128_impl.h"
#include "scratch_impl.h"
#include "ecmult_impl.h"

#define SNAP_CAT2(a, b) a##b
#define SNAP_CAT(a, b) SNAP_CAT2(a, b)
#define S(name) SNAP_CAT(SNAP_SECP, name)

typedef S(scalar) snap_scalar;
typedef S(ge) snap_ge;
typedef S(gej) snap_gej;
typedef S(fe) snap_fe;

/* Each key's table: the odd multiples P, 3P, ..., 31P of its point (wNAF window 6), in
 * affine coordinates and the library's 64-byte storage form. Built once per key and kept by
 * the caller between batches (native/src/check.rs), so a batch neither lifts a key's x to
 * its point nor builds its multiples again. */
#define SNAP_KEY_WINDOW 6
#define SNAP_KEY_ENTRIES ECMULT_TABLE_SIZE(SNAP_KEY_WINDOW)
/* each nonce point R_i is multiplied by its 128-bit weight, with a smaller window */
#define SNAP_R_WINDOW 5
#define SNAP_R_ENTRIES ECMULT_TABLE_SIZE(SNAP_R_WINDOW)
/* every scalar of the sum below has at most this many bits in wNAF */
#define SNAP_WNAF_BITS 129

size_t snap_bip340_key_table_size(void) {
    return SNAP_KEY_ENTRIES * sizeof(S(ge_storage));
}

/*
 * Fill `table` (snap_bip340_key_table_size() bytes) for the x-only key `key_x` (32 bytes).
 * Returns 0, writing nothing, when x is not below p or is no curve point's x.
 */
int snap_bip340_key_table(const unsigned char *key_x, unsigned char *table) {
    snap_fe x;
    snap_ge point, affine[SNAP_KEY_ENTRIES];
    snap_gej twice, multiples[SNAP_KEY_ENTRIES];
    S(ge_storage) stored;
    size_t i;

    if (!S(fe_set_b32_limit)(&x, key_x) || !S(ge_set_xo_var)(&point, &x, 0)) {
        return 0;
    }
    S(gej_set_ge)(&multiples[0], &point);
    S(gej_double_var)(&twice, &multiples[0], NULL);
    for (i = 1; i < SNAP_KEY_ENTRIES; i++) {
        S(gej_add_var)(&multiples[i], &multiples[i - 1], &twice, NULL);
    }
    S(ge_set_all_gej_var)(affine, multiples, SNAP_KEY_ENTRIES);
    for (i = 0; i < SNAP_KEY_ENTRIES; i++) {
        S(ge_to_storage)(&stored, &affine[i]);
        memcpy(&table[i * sizeof(stored)], &stored, sizeof(stored));
    }
    return 1;
}

/* The multiple `digit` (odd, |digit| < 2^(SNAP_KEY_WINDOW-1)) of a key from its table, or
 * of lambda times the key (x multiplied by beta: the curve's endomorphism). */
static void snap_key_multiple(snap_ge *out, const unsigned char *table, int digit, int lambda) {
    S(ge_storage) stored;
    int index = (digit > 0 ? digit : -digit) / 2;
    memcpy(&stored, &table[index * sizeof(stored)], sizeof(stored));
    S(ge_from_storage)(out, &stored);
    if (lambda) {
        S(fe_mul)(&out->x, &out->x, &S(const_beta));
    }
    if (digit < 0) {
        S(fe_negate)(&out->y, &out->y, 1);
    }
}

/*
 * Check n signatures at once.
 *
 *   sigs     n * 64 bytes: r || s of each signature
 *   chals    n * 32 bytes: the BIP-340 challenge hash of each (tagged SHA-256 of
 *            r || P.x || m), reduced mod the group order here as the library does
 *   weights  n * 16 bytes: the random weight of each signature (the first is taken as 1)
 *   key_of   n indices into tables
 *   tables   k pointers to the distinct keys' tables (snap_bip340_key_table)
 *
 * Returns 1 when every signature verifies, 0 when at least one does not (or cannot be
 * read: r not below p or not an x-coordinate, s not below the group order).
 *
 * The sum is Strauss's: one chain of doublings shared by every term, each term added at
 * the digits of its scalar's wNAF. The scalars have at most 129 bits: a weight a_i has 128;
 * a key's sum of a_i e_i and G's sum of a_i s_i are split in two halves of about 128 bits
 * (the key's by the endomorphism, G's at bit 128, as libsecp256k1's own ecmult does).
 * The R_i's tables share one z coordinate Z (the library's isomorphism trick), so the
 * affine entries of the keys' tables and of G's are added as points with z = 1/Z.
 */
int snap_bip340_batch_verify(const unsigned char *sigs, const unsigned char *chals,
                             const unsigned char *weights, const uint32_t *key_of,
                             size_t n, const unsigned char *const *tables, size_t k) {
    size_t i, j;
    snap_ge *r_pre = NULL, entry;
    snap_fe *r_zr = NULL, x, Z;
    snap_scalar *key_sc = NULL, g_sc, s, e, a, ae, half1, half2;
    int8_t *r_wnaf = NULL, *key_wnaf = NULL;
    int g_wnaf[2][SNAP_WNAF_BITS], bits = 0, got, bit, digit, ok = 0;
    snap_gej sum, lifted;

    if (n == 0) {
        return 1;
    }
    r_pre = (snap_ge *)malloc(n * SNAP_R_ENTRIES * sizeof(snap_ge));
    r_zr = (snap_fe *)malloc(n * SNAP_R_ENTRIES * sizeof(snap_fe));
    r_wnaf = (int8_t *)malloc(n * SNAP_WNAF_BITS);
    key_sc = (snap_scalar *)malloc(k * sizeof(snap_scalar));
    key_wnaf = (int8_t *)malloc(2 * k * SNAP_WNAF_BITS);
    if (r_pre == NULL || r_zr == NULL || r_wnaf == NULL || key_sc == NULL || key_wnaf == NULL) {
        goto done;
    }
    for (j = 0; j < k; j++) {
        S(scalar_set_int)(&key_sc[j], 0);
    }
    S(scalar_set_int)(&g_sc, 0);
    S(fe_set_int)(&Z, 1);
    for (i = 0; i < n; i++) {
        unsigned char wide[32];
        int overflow;
        const unsigned char *sig = &sigs[64 * i];
        snap_ge r_point;
        if (key_of[i] >= k) {
            goto done;
        }
        /* R_i: x = r, y even; a signature whose r is no such point is invalid */
        if (!S(fe_set_b32_limit)(&x, sig) || !S(ge_set_xo_var)(&r_point, &x, 0)) {
            goto done;
        }
        S(scalar_set_b32)(&s, &sig[32], &overflow);
        if (overflow) {
            goto done;
        }
        S(scalar_set_b32)(&e, &chals[32 * i], NULL);
        if (i == 0) {
            S(scalar_set_int)(&a, 1);
        } else {
            memset(wide, 0, 16);
            memcpy(&wide[16], &weights[16 * i], 16);
            S(scalar_set_b32)(&a, wide, NULL);
            if (S(scalar_is_zero)(&a)) {
                S(scalar_set_int)(&a, 1);
            }
        }
        /* G's scalar gathers a_i s_i; R_i's is -a_i (R_i's digits are taken negated
         * below); the key's gathers -a_i e_i */
        S(scalar_mul)(&s, &s, &a);
        S(scalar_add)(&g_sc, &g_sc, &s);
        S(scalar_mul)(&ae, &a, &e);
        S(scalar_negate)(&ae, &ae);
        S(scalar_add)(&key_sc[key_of[i]], &key_sc[key_of[i]], &ae);
        got = S(ecmult_wnaf_small)(&r_wnaf[i * SNAP_WNAF_BITS], SNAP_WNAF_BITS, &a, SNAP_R_WINDOW);
        bits = got > bits ? got : bits;
        /* R_i's odd multiples, brought to the running common z as the library's Strauss
         * does (R_i is affine, so its own z needs no correction) */
        S(gej_set_ge)(&lifted, &r_point);
        if (i) {
            S(gej_rescale)(&lifted, &Z);
        }
        S(ecmult_odd_multiples_table)(SNAP_R_ENTRIES, &r_pre[i * SNAP_R_ENTRIES],
                                      &r_zr[i * SNAP_R_ENTRIES], &Z, &lifted);
    }
    S(ge_table_set_globalz)(n * SNAP_R_ENTRIES, r_pre, r_zr);

    for (j = 0; j < k; j++) {
        S(scalar_split_lambda)(&half1, &half2, &key_sc[j]);
        got = S(ecmult_wnaf_small)(&key_wnaf[(2 * j) * SNAP_WNAF_BITS], SNAP_WNAF_BITS, &half1,
                                   SNAP_KEY_WINDOW);
        bits = got > bits ? got : bits;
        got = S(ecmult_wnaf_small)(&key_wnaf[(2 * j + 1) * SNAP_WNAF_BITS], SNAP_WNAF_BITS,
                                   &half2, SNAP_KEY_WINDOW);
        bits = got > bits ? got : bits;
    }
    S(scalar_split_128)(&half1, &half2, &g_sc);
    got = S(ecmult_wnaf)(g_wnaf[0], SNAP_WNAF_BITS, &half1, WINDOW_G);
    bits = got > bits ? got : bits;
    got = S(ecmult_wnaf)(g_wnaf[1], SNAP_WNAF_BITS, &half2, WINDOW_G);
    bits = got > bits ? got : bits;

    S(gej_set_infinity)(&sum);
    for (bit = bits - 1; bit >= 0; bit--) {
        S(gej_double_var)(&sum, &sum, NULL);
        for (i = 0; i < n; i++) {
            if ((digit = r_wnaf[i * SNAP_WNAF_BITS + bit])) {
                S(ecmult_table_get_ge)(&entry, &r_pre[i * SNAP_R_ENTRIES], -digit, SNAP_R_WINDOW);
                S(gej_add_ge_var)(&sum, &sum, &entry, NULL);
            }
        }
        for (j = 0; j < k; j++) {
            if ((digit = key_wnaf[(2 * j) * SNAP_WNAF_BITS + bit])) {
                snap_key_multiple(&entry, tables[j], digit, 0);
                S(gej_add_zinv_var)(&sum, &sum, &entry, &Z);
            }
            if ((digit = key_wnaf[(2 * j + 1) * SNAP_WNAF_BITS + bit])) {
                snap_key_multiple(&entry, tables[j], digit, 1);
                S(gej_add_zinv_var)(&sum, &sum, &entry, &Z);
            }
        }
        if ((digit = g_wnaf[0][bit])) {
            S(ecmult_table_get_ge_storage)(&entry, S(pre_g), digit, WINDOW_G);
            S(gej_add_zinv_var)(&sum, &sum, &entry, &Z);
        }
        if ((digit = g_wnaf[1][bit])) {
            S(ecmult_table_get_ge_storage)(&entry, S(pre_g_128), digit, WINDOW_G);
            S(gej_add_zinv_var)(&sum, &sum, &entry, &Z);
        }
    }
    /* the weight of R_0 is 1: a sum with no digit at all cannot pass */
    ok = bits > 0 && S(gej_is_infinity)(&sum);

done:
    free(r_pre);
    free(r_zr);
    free(r_wnaf);
    free(key_sc);
    free(key_wnaf);
    return ok;
}
