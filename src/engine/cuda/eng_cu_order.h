/* eng_cu_order.h: the serpentine launch order's state (eng_cu_order.c),
 * C-callable, no CUDA types: eng_cu_order_begin(on) at a forward's start
 * (per thread); each launcher of the step asks eng_cu_order_take(1) where
 * its kernel can walk its rows last to first (1: do so), and
 * eng_cu_order_take(0) where it cannot. */
#ifndef ENG_CU_ORDER_H
#define ENG_CU_ORDER_H

#ifdef __cplusplus
extern "C" {
#endif

void eng_cu_order_begin(int on);
int eng_cu_order_take(int reversible);

#ifdef __cplusplus
}
#endif
#endif
