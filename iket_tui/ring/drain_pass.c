/* The ring drain's per-record work in one native pass (iket_tui/ring/native_drain.py builds and
 * loads it; iket_tui/ring/drain.py is the reference and the fallback).
 *
 * iket_scan reads each record of the active segments once, in position order from where the
 * segment is readable: its stamp before the copy, its words and stamp in the copy, its stamp
 * after; the first record whose three stamps do not all name its position is where the
 * segment's pass stops. On the way it notes the warps' own records (low byte of the word 0).
 * iket_chunks cuts the runs of a warp's events into drained chunks and writes each whole, its
 * header and its events, reading each event's record once more (the numpy drain gathers them in
 * several passes).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Returns how many own records were noted, in order, or -1 when there were more than own_cap
 * (the stops are then still right): own[j] is row * cap + relative position, own[own_cap + j],
 * own[2 * own_cap + j] and own[3 * own_cap + j] its word, hi and payload. */
int64_t iket_scan(int64_t n, int64_t cap, const uint32_t *before, int64_t before_row, int64_t before_col,
                  const int64_t *before_index, const uint32_t *records, const uint32_t *after,
                  int64_t after_row, int64_t after_col, const int64_t *off, const int64_t *rf, int64_t *stop,
                  int64_t *own, int64_t own_cap) {
    const int64_t mask = cap - 1;
    int64_t k = 0;
    int overflow = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t *b = before + before_index[i] * before_row;
        const uint32_t *r = records + i * cap * 4;
        const uint32_t *a = after + i * after_row;
        const int64_t o = off[i];
        const uint32_t first = (uint32_t)(rf[i] + 1);
        int64_t rel = 0;
        for (; rel < cap; rel++) {
            const int64_t slot = (o + rel) & mask;
            const uint32_t expected = first + (uint32_t)rel;
            const uint32_t *record = r + slot * 4;
            if (b[slot * before_col] != expected || record[3] != expected || a[slot * after_col] != expected) {
                break;
            }
            if ((record[0] & 0xFFu) == 0) {
                if (k < own_cap) {
                    own[k] = i * cap + rel;
                    own[own_cap + k] = record[0];
                    own[2 * own_cap + k] = record[1];
                    own[3 * own_cap + k] = record[2];
                } else {
                    overflow = 1;
                }
                k++;
            }
        }
        stop[i] = rel;
    }
    return overflow ? -1 : k;
}

/* The drained chunks of n_pieces pieces (runs of one warp's consecutive records within one
 * segment copy row, in output order): each piece cut into chunks of at most per events (one
 * chunk of none for an empty piece), each chunk written whole, header and events, into out
 * (chunk_words words a chunk). A piece's first chunk takes first_flags, its last last_flags;
 * every chunk has payload_flag. t_base is the chunk's first event's time, its id_bits low bits
 * cleared, or empty_t for a chunk of no events. Returns the chunks written, or -1 (with out
 * partly written) where a chunk's events lie 2**32 ns or more apart: the caller cuts those. */
int64_t iket_chunks(const uint32_t *records, int64_t cap, int64_t n_pieces, const int64_t *row,
                    const int64_t *slot, const int64_t *len, const int64_t *header, const int64_t *first_flags,
                    const int64_t *last_flags, const int64_t *empty_t, const int64_t *segment,
                    const uint32_t *table, uint32_t *out, int64_t chunk_words, int64_t first_word, int64_t per,
                    int64_t payload_flag) {
    int64_t c = 0;
    for (int64_t p = 0; p < n_pieces; p++) {
        const uint32_t *identity = table + header[p] * 5;
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
            chunk[0] = (uint32_t)segment[row[p]];
            chunk[1] = 0;
            chunk[2] = 0;
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
            for (int64_t w = first_word + 2 * per; w < chunk_words; w++) chunk[w] = 0;
        }
    }
    return c;
}
