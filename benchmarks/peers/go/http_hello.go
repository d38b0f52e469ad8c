//go:build ignore

// http_hello peer: the same minimal HTTP/1.1 "hello" responder as
// examples/http_hello.cpp, on package net (not net/http): a goroutine per
// connection, a hand-written parser that answers each request (headers up
// to a blank line) with a fixed 200 OK; keep-alive and pipelining.
// Usage: go run http_hello.go -port 8081 -procs 1
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"runtime"
)

const response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"

func serveConn(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 0, 8192)
	chunk := make([]byte, 4096)
	out := make([]byte, 0, 4096)
	sep := []byte("\r\n\r\n")
	for {
		n, err := c.Read(chunk)
		if n == 0 || err != nil {
			return
		}
		buf = append(buf, chunk[:n]...)
		start := 0
		for {
			i := bytes.Index(buf[start:], sep)
			if i < 0 {
				break
			}
			out = append(out, response...)
			start += i + 4
		}
		buf = append(buf[:0], buf[start:]...)
		if len(buf) > 64*1024 {
			return
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}

func main() {
	port := flag.Int("port", 8081, "port on 127.0.0.1")
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		panic(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			panic(err)
		}
		go serveConn(c)
	}
}
