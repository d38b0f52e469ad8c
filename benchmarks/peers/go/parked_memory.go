//go:build ignore

// parked_memory peer: N goroutines (default 100,000) each block receiving
// from one unbuffered channel; resident memory growth per goroutine, read
// from /proc/self/statm once all have started, then the channel is closed.
// One measurement per repetition; Go keeps freed goroutine stacks, so the
// runner uses one repetition per process.
//
//	go build -o parked_memory parked_memory.go && ./parked_memory -procs 2
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func residentBytes() int64 {
	var pages, resident int64
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0
	}
	defer f.Close()
	fmt.Fscan(f, &pages, &resident)
	return resident * int64(os.Getpagesize())
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 1, "measured repetitions")
	n := flag.Int("n", 100000, "goroutines")
	small := flag.Int("small", 0, "ignored (goro's small-stack policy)")
	flag.Parse()
	_ = small
	runtime.GOMAXPROCS(*procs)
	for rep := 0; rep < *reps; rep++ {
		ch := make(chan int)
		var started, finished sync.WaitGroup
		started.Add(*n)
		finished.Add(*n)
		before := residentBytes()
		for i := 0; i < *n; i++ {
			go func() {
				started.Done()
				<-ch
				finished.Done()
			}()
		}
		started.Wait()
		time.Sleep(20 * time.Millisecond)
		after := residentBytes()
		close(ch)
		finished.Wait()
		for _, w := range []string{"parked_memory", "parked_memory_small"} {
			fmt.Printf("RESULT workload=%s impl=go procs=%d bytes_per_goroutine=%.1f n=%d\n",
				w, *procs, float64(after-before)/float64(*n), *n)
		}
	}
}
