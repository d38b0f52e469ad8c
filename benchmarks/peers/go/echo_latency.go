//go:build ignore

// echo_latency peer: round-trip latency over loopback TCP with package net.
// An echo server (a goroutine per connection: read, write back what was
// read) and -conns client goroutines, each on its own connection, each
// doing -n round trips: write a -size byte message (default 64), read
// until all of it came back. Every round trip is timed on its own.
// Metric: the median round trip in ns over all connections' round trips
// of one repetition; p99_ns and the round trips per second as extras.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"sort"
	"sync"
	"time"
)

func echo(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n == 0 || err != nil {
			break
		}
		if _, err := c.Write(buf[:n]); err != nil {
			break
		}
	}
	c.Close()
}

func client(addr string, n, size int, out []int64) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = 'x'
	}
	back := make([]byte, size)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			panic(err)
		}
		out[i] = int64(time.Since(t0))
	}
	c.Close()
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	conns := flag.Int("conns", 1, "client connections")
	n := flag.Int("n", 20000, "round trips per connection")
	size := flag.Int("size", 64, "message bytes")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	if *conns < 1 {
		*conns = 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	lat := make([]int64, *conns**n)
	for rep := 0; rep < *warmup+*reps; rep++ {
		go func() { // accepts this repetition's connections
			for i := 0; i < *conns; i++ {
				s, err := ln.Accept()
				if err != nil {
					panic(err)
				}
				go echo(s)
			}
		}()
		var wg sync.WaitGroup
		wg.Add(*conns)
		t0 := time.Now()
		for i := 0; i < *conns; i++ {
			go func(i int) {
				client(addr, *n, *size, lat[i**n:(i+1)**n])
				wg.Done()
			}(i)
		}
		wg.Wait()
		dt := time.Since(t0)
		if rep < *warmup {
			continue
		}
		sorted := append([]int64(nil), lat...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		med := sorted[int(0.5*float64(len(sorted)-1))]
		p99 := sorted[int(0.99*float64(len(sorted)-1))]
		fmt.Printf("RESULT workload=echo_latency impl=go procs=%d median_ns=%d.000 p99_ns=%d conns=%d n=%d size=%d round_trips_per_s=%.3f\n",
			*procs, med, p99, *conns, *n, *size, float64(*conns**n)/dt.Seconds())
	}
	ln.Close()
}
