/* The ring drain's per-record work in one native pass (iket_tui/ring/native_drain.py builds and
 * loads it; iket_tui/ring/drain.py is the reference and the fallback).
 *
 * iket_regions reads each region of a pass from the position its reader expects next: a record
 * is taken while its stamp (and, for memory the writers write while it is read, its stamps before
 * and after the copy) names the claim and that position; the first that does not is where the
 * region's pass stops. Only where the expected record is not there (the warp lapped its own
 * region, or wrote nothing new) is the whole region looked at, for the newest position it holds.
 * iket_chunks cuts the runs of a warp's events into drained chunks and writes each whole, its
 * header and its events, reading each event's record once more.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* For each region i of n (cap records each, records[rows[i] * cap * 4 ...]; its stamps before and
 * after the copy, where given, at before[i * cap ...] and after[i * cap ...]): base[i] is the stamp of
 * the warp's position 0, read[i] the next position to read, count[i] the positions the warp wrote
 * (-1 while it runs), begun[i] whether the descriptor names the claim. Writes start[i] (where the
 * run begins: read[i], or later where the warp overwrote positions before they were read),
 * run[i] (positions taken from start[i]) and newest[i] (the newest position found, -1 none). */
void iket_regions(int64_t n, int64_t cap, const uint32_t *records, const int64_t *rows, const uint32_t *before,
                  const uint32_t *after, const uint32_t *base, const int64_t *read, const int64_t *count,
                  const uint8_t *begun, int64_t *start, int64_t *run, int64_t *newest) {
    const uint32_t mask = (uint32_t)(cap - 1);
    for (int64_t i = 0; i < n; i++) {
        start[i] = read[i];
        run[i] = 0;
        newest[i] = -1;
        if (!begun[i]) continue;
        const uint32_t *rec = records + rows[i] * cap * 4;
        const uint32_t *b = before ? before + i * cap : NULL;
        const uint32_t *a = after ? after + i * cap : NULL;
        const int64_t limit = count[i] < 0 ? INT64_MAX : count[i];
        int64_t from = read[i];
        if (from >= limit) continue;
        uint32_t slot = (uint32_t)from & mask;
        uint32_t stamp = rec[slot * 4 + 3];
        int ok = stamp == base[i] + (uint32_t)from && (!b || b[slot] == stamp) && (!a || a[slot] == stamp);
        if (!ok) { /* not the next record: the newest the region holds, if any is newer */
            int64_t best = -1;
            for (int64_t s = 0; s < cap; s++) {
                const uint32_t st = rec[s * 4 + 3];
                const uint32_t p = st - base[i];
                if (p >= UINT32_C(0x80000000) || (p & mask) != (uint32_t)s) continue;
                if ((b && b[s] != st) || (a && a[s] != st)) continue;
                if ((int64_t)p >= limit || (int64_t)p < from) continue;
                /* a position counts only where the one before it is there too (or it is the next
                 * to read): one damaged stamp never passes for the warp's newest record */
                const uint32_t s1 = (uint32_t)(s - 1) & mask;
                const uint32_t st1 = rec[s1 * 4 + 3];
                if ((int64_t)p != from && (cap < 2 || st1 != st - 1u || (b && b[s1] != st1) || (a && a[s1] != st1)))
                    continue;
                if ((int64_t)p > best) best = (int64_t)p;
            }
            newest[i] = best;
            if (best < 0) continue;
            if (best - cap + 1 > from) from = best - cap + 1;
        }
        int64_t k = 0;
        const int64_t most = limit - from < cap ? limit - from : cap;
        for (; k < most; k++) {
            const uint32_t s = (uint32_t)(from + k) & mask;
            const uint32_t st = rec[s * 4 + 3];
            if (st != base[i] + (uint32_t)(from + k) || (b && b[s] != st) || (a && a[s] != st)) break;
        }
        start[i] = from;
        run[i] = k;
        if (k > 0 && from + k - 1 > newest[i]) newest[i] = from + k - 1;
    }
}

/* Writes the drained chunks of n_pieces pieces (len[p] records from slot[p] of region row[p])
 * into out (chunk_words words a chunk). A piece's first chunk takes first_flags, its last
 * last_flags; every chunk has payload_flag. The header words come from table (9 words per warp,
 * row header[p]: words 3 to 7, then words 0, 1, 2 and the tail). t_base is the chunk's first
 * event's time, its id_bits low bits cleared, or empty_t for a chunk of no events. Returns the
 * chunks written, or -1 (with out partly written) where a chunk's events lie 2**32 ns or more
 * apart: the caller cuts those. */
int64_t iket_chunks(const uint32_t *records, int64_t cap, int64_t n_pieces, const int64_t *row, const int64_t *slot,
                    const int64_t *len, const int64_t *header, const int64_t *first_flags, const int64_t *last_flags,
                    const int64_t *empty_t, const uint32_t *table, uint32_t *out, int64_t chunk_words,
                    int64_t first_word, int64_t per, int64_t payload_flag) {
    int64_t c = 0;
    for (int64_t p = 0; p < n_pieces; p++) {
        const uint32_t *identity = table + header[p] * 9;
        const uint64_t not_id = ~((UINT64_C(1) << ((identity[4] >> 24) & 0xFF)) - 1);
        const int64_t total = len[p];
        const int64_t n_chunks = total > 0 ? (total + per - 1) / per : 1;
        for (int64_t at = 0; at < n_chunks; at++, c++) {
            uint32_t *chunk = out + c * chunk_words;
            const int64_t m = at == n_chunks - 1 ? total - per * (n_chunks - 1) : per;
            const uint32_t *record = records + (row[p] * cap + slot[p] + at * per) * 4;
            int64_t flags = payload_flag;
            if (at == 0) flags |= first_flags[p];
            if (at == n_chunks - 1) flags |= last_flags[p];
            uint64_t t_base = (uint64_t)empty_t[p];
            if (m > 0) {
                t_base = ((uint64_t)record[1] << 32 | record[0]) & not_id;
                const uint64_t t_last = ((uint64_t)record[(m - 1) * 4 + 1] << 32 | record[(m - 1) * 4]) & not_id;
                if ((int64_t)(t_last - t_base) >= (INT64_C(1) << 32)) return -1;
            }
            chunk[0] = identity[5];
            chunk[1] = identity[6];
            chunk[2] = identity[7];
            chunk[3] = identity[0] | (uint32_t)flags << 24;
            chunk[4] = identity[1];
            chunk[5] = identity[2];
            chunk[6] = identity[3];
            chunk[7] = identity[4] | (uint32_t)m * 0x10100u;
            chunk[8] = (uint32_t)t_base;
            chunk[9] = (uint32_t)(t_base >> 32);
            for (int64_t w = 10; w < first_word; w++) chunk[w] = 0;
            uint32_t *words = chunk + first_word;
            uint32_t *payloads = words + per;
            int64_t j = 0;
            for (; j < m; j++) {
                words[j] = record[j * 4];
                payloads[j] = record[j * 4 + 2];
            }
            for (; j < per; j++) {
                words[j] = 0;
                payloads[j] = 0;
            }
            for (int64_t w = first_word + 2 * per; w < chunk_words - 1; w++) chunk[w] = 0;
            chunk[chunk_words - 1] = identity[8];
        }
    }
    return c;
}
