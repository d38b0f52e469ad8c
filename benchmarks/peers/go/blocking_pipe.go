//go:build ignore

// blocking_pipe peer: P pairs of goroutines (default 4) ping-pong one byte
// through two pipes with raw syscall.Read / syscall.Write (blocking fds,
// not the netpoller), so every read blocks in the kernel: Go's
// entersyscall / exitsyscall and sysmon's retake. Metric: ns per round
// trip = wall / (pairs * rounds).
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	pairs := flag.Int("pairs", 4, "goroutine pairs")
	rounds := flag.Int("rounds", 20000, "round trips per pair")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	fds := make([][4]int, *pairs)
	for i := range fds {
		var a, b [2]int
		if syscall.Pipe(a[:]) != nil || syscall.Pipe(b[:]) != nil {
			panic("pipe")
		}
		fds[i] = [4]int{a[0], a[1], b[0], b[1]}
	}
	for rep := 0; rep < *warmup+*reps; rep++ {
		var wg sync.WaitGroup
		wg.Add(2 * *pairs)
		t0 := time.Now()
		for i := 0; i < *pairs; i++ {
			f := fds[i]
			go func() {
				b := []byte{1}
				for k := 0; k < *rounds; k++ {
					if n, _ := syscall.Write(f[1], b); n != 1 {
						panic("write")
					}
					if n, _ := syscall.Read(f[2], b); n != 1 {
						panic("read")
					}
				}
				wg.Done()
			}()
			go func() {
				b := []byte{0}
				for k := 0; k < *rounds; k++ {
					if n, _ := syscall.Read(f[0], b); n != 1 {
						panic("read")
					}
					if n, _ := syscall.Write(f[3], b); n != 1 {
						panic("write")
					}
				}
				wg.Done()
			}()
		}
		wg.Wait()
		dt := time.Since(t0)
		if rep >= *warmup {
			fmt.Printf("RESULT workload=blocking_pipe impl=go procs=%d ns_per_op=%.3f pairs=%d rounds=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(*pairs**rounds), *pairs, *rounds)
		}
	}
}
