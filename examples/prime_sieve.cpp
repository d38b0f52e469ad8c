// prime_sieve: Go's concurrent prime sieve. A generator goroutine sends
// 2, 3, 4, ... on a channel; each prime found adds a filter goroutine that
// drops that prime's multiples from the stream it passes on. Prints the
// first 100 primes; exits 0 when they are right.
#include <goro/goro.hpp>

#include <cstdio>
#include <vector>

namespace {

// Sends 2, 3, 4, ... on out until quit is closed, then closes out.
void generate(goro::chan<int> out, goro::chan<int> quit) {
  for (int i = 2;; ++i) {
    bool stop = false;
    goro::select(goro::on_send(out, i, [] {}), goro::on_recv(quit, [&](std::optional<int>) { stop = true; }));
    if (stop) break;
  }
  out.close();
}

// Copies in to out, dropping multiples of prime; closes out when in closes.
void filter(goro::chan<int> in, goro::chan<int> out, int prime) {
  for (int v : in)
    if (v % prime != 0) out.send(v);
  out.close();
}

}  // namespace

int main() {
  std::vector<int> primes = goro::run([] {
    std::vector<int> found;
    goro::chan<int> first, quit;
    goro::go(generate, first, quit);
    goro::chan<int> ch = first;
    for (int i = 0; i < 100; ++i) {
      int prime = *ch.recv();
      found.push_back(prime);
      goro::chan<int> next;
      goro::go(filter, ch, next, prime);
      ch = next;
    }
    // Shut the pipeline down: the generator closes its channel, which ends
    // every filter in turn; drain what is still in flight.
    quit.close();
    for (int v : ch) (void)v;
    return found;
  });
  for (std::size_t i = 0; i < primes.size(); ++i) std::printf("%d%c", primes[i], i % 20 == 19 ? '\n' : ' ');
  bool ok = primes.size() == 100 && primes.front() == 2 && primes.back() == 541;
  return ok ? 0 : 1;
}
