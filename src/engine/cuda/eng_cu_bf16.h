/* eng_cu_bf16: fp32 <-> bf16 bit conversions on the host, in plain C so
 * that both the CUDA sources (through eng_cu.h) and the host-only packing
 * of weights (eng_cu_qwen3_pack.c, and its CPU unit test) use one
 * definition.  Round to nearest even, NaN kept quiet. */
#ifndef ENG_CU_BF16_H
#define ENG_CU_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t eng_cu_f2bf_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    const uint32_t r = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + r) >> 16);
}

static inline float eng_cu_bf_bits2f(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
