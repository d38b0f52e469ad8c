//go:build ignore

// skynet peer: a tree of goroutines, 10 children per node, N leaves
// (default 1,000,000). Metric: ns per goroutine (wall / all nodes).
package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"
)

func skynet(c chan int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64, 10)
	sub := size / 10
	for i := int64(0); i < 10; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	leaves := flag.Int64("leaves", 1000000, "leaves")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	nodes := int64(0)
	for l := *leaves; l >= 1; l /= 10 {
		nodes += l
	}
	for rep := 0; rep < *warmup+*reps; rep++ {
		out := make(chan int64)
		t0 := time.Now()
		go skynet(out, 0, *leaves)
		sum := <-out
		dt := time.Since(t0)
		if sum != *leaves*(*leaves-1)/2 {
			panic("skynet: wrong sum")
		}
		if rep >= *warmup {
			fmt.Printf("RESULT workload=skynet impl=go procs=%d ns_per_op=%.3f leaves=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(nodes), *leaves)
		}
	}
}
