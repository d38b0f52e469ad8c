#pragma once

#include <goro/goro.hpp>

// Spawns n goroutines that send i*i and returns the sum (worker.cpp).
int sum_squares(int n);
// Blocks in "chan receive" until c yields a value or closes (worker.cpp).
void park_forever(goro::chan<int>& c);
