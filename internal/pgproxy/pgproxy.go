// Package pgproxy is a TCP proxy between a PostgreSQL client and its server that reads the wire
// protocol's framing (a type byte and an int32 length per message) and fires a fault on a chosen
// message: the Nth CommandComplete "COMMIT" the server sends, or the Nth statement the client sends
// that contains a given text. Faults fire on what the connection carries, never on timing, so a
// test that uses it is deterministic. It is for tests and benchmarks; nothing in the service
// links it.
package pgproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"
)

// Action is what a fault does to the connection it fires on.
type Action int

const (
	// Cut closes both sides at once; the message the fault fired on is not forwarded.
	Cut Action = iota + 1
	// BlackHole stops forwarding in both directions and keeps both sockets open: the client
	// waits on a connection that will never answer, as behind a NAT that dropped the flow.
	BlackHole
	// Latency delays every server message from the one the fault fires on, by Fault.Delay.
	Latency
	// Reset forwards the client's message, then resets the client's connection (RST, not FIN)
	// and closes the server's: the statement is in flight when the connection dies.
	Reset
	// Hook holds the message back, calls Fault.Hook, then closes both sides: for a restart of
	// what stands behind the proxy (a pooler) while the reply is in flight.
	Hook
)

// Fault is one fault a Proxy fires once, on the Nth message that matches it, across every
// connection the proxy carries.
type Fault struct {
	// Nth is which matching message fires it, from 1.
	Nth int
	// Statement, when set, matches a client Query or Parse message whose text contains it; empty
	// matches the server's CommandComplete "COMMIT".
	Statement string
	// In, for a COMMIT, matches only the commit of a transaction that sent a statement
	// containing it (a batch's DELETE, not a survey's read-only transaction).
	In string
	// Action is what it does.
	Action Action
	// Delay is Latency's added delay per server message.
	Delay time.Duration
	// Hook is Hook's call.
	Hook func()
}

// Proxy forwards connections from its listener to Upstream.
type Proxy struct {
	upstream string
	addr     string

	mu     sync.Mutex
	ln     net.Listener
	fault  *Fault
	seen   int
	fired  chan struct{}
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards every connection to upstream (host:port).
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &Proxy{ln: ln, addr: ln.Addr().String(), upstream: upstream, conns: map[*pair]struct{}{}, fired: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.addr }

// Arm sets the fault the proxy fires next, replacing any other, and counts matches from zero.
// The channel it returns is closed when the fault fires.
func (p *Proxy) Arm(f Fault) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.seen, p.fired = &f, 0, make(chan struct{})
	return p.fired
}

// Disarm disarms the fault, if any, and leaves the connections as they are.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = nil
}

// Heal disarms the fault and closes every connection the proxy holds, black-holed ones included:
// new connections pass again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.fault = nil
	conns := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Down stops accepting connections, as a server out of reach would: a dial is refused. The
// connections it holds go on.
func (p *Proxy) Down() {
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	_ = ln.Close()
}

// Up accepts connections again, on the same address.
func (p *Proxy) Up() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("listen again: %w", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept()
	return nil
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ln := p.ln
	p.mu.Unlock()
	err := ln.Close()
	p.Heal()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// pair is one proxied connection: the client's socket and the server's.
type pair struct {
	client, server net.Conn
	once           sync.Once
	// hole is closed when a black hole swallows the connection: both directions stop.
	hole     chan struct{}
	holeOnce sync.Once
	// sent is the client's statements since the last COMMIT reply, for Fault.In.
	mu   sync.Mutex
	sent []byte
}

// note keeps a statement the client sent, and says whether the transaction so far sent in.
func (c *pair) note(text []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sent) < 1<<16 {
		c.sent = append(c.sent, text...)
	}
}

// committed reports whether the transaction a COMMIT reply ends sent in, and forgets it.
func (c *pair) committed(in string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := bytes.Contains(c.sent, []byte(in))
	c.sent = c.sent[:0]
	return ok
}

func (c *pair) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

func (c *pair) blackHole() { c.holeOnce.Do(func() { close(c.hole) }) }

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", p.upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	c := &pair{client: client, server: server, hole: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.close()
	}()
	done := make(chan struct{}, 2)
	go func() { p.clientToServer(c); done <- struct{}{} }()
	go func() { p.serverToClient(c); done <- struct{}{} }()
	<-done
	// A black hole keeps both sockets open until Heal or Close (or the client hangs up).
	select {
	case <-c.hole:
	default:
		c.close()
	}
	<-done
}

// match counts a message that may fire the armed fault, and returns the fault when this one
// fires it.
func (p *Proxy) match(c *pair, statement bool, text []byte) *Fault {
	if statement {
		c.note(text)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if !statement && bytes.HasPrefix(text, []byte("COMMIT\x00")) && f != nil && f.In != "" && !c.committed(f.In) {
		return nil
	}
	if f == nil || (f.Statement != "") != statement {
		return nil
	}
	if statement && !bytes.Contains(text, []byte(f.Statement)) {
		return nil
	}
	if !statement && !bytes.HasPrefix(text, []byte("COMMIT\x00")) {
		return nil
	}
	p.seen++
	if p.seen != f.Nth {
		return nil
	}
	if f.Action != Latency {
		p.fault = nil
	}
	select {
	case <-p.fired:
	default:
		close(p.fired)
	}
	return f
}

// clientToServer forwards the client's messages: the startup packet (answering an SSL or GSS
// encryption request with "N" itself, so the session stays readable), then typed messages.
func (p *Proxy) clientToServer(c *pair) {
	r := bufio.NewReader(c.client)
	if err := p.startup(c, r); err != nil {
		return
	}
	for {
		typ, msg, err := readMessage(r)
		if err != nil {
			return
		}
		var f *Fault
		if typ == 'Q' || typ == 'P' {
			f = p.match(c, true, msg[5:])
		}
		if p.swallowed(c) {
			return
		}
		if _, err := c.server.Write(msg); err != nil {
			return
		}
		if f != nil && p.fire(c, f) {
			return
		}
	}
}

// startup forwards the untyped first packets: an SSLRequest or GSSENCRequest is refused with
// "N" and the next packet read; a CancelRequest or StartupMessage goes through.
func (p *Proxy) startup(c *pair, r *bufio.Reader) error {
	for {
		var head [8]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(head[:4])
		code := binary.BigEndian.Uint32(head[4:])
		if n == 8 && (code == sslRequest || code == gssRequest) {
			if _, err := c.client.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		}
		if n < 8 || n > maxMessage {
			return fmt.Errorf("startup packet of %d bytes", n)
		}
		rest := make([]byte, n-8)
		if _, err := io.ReadFull(r, rest); err != nil {
			return err
		}
		_, err := c.server.Write(append(head[:], rest...))
		return err
	}
}

// The startup request codes (PostgreSQL's protocol, "Message Formats").
const (
	sslRequest = 80877103
	gssRequest = 80877104
	maxMessage = 1 << 30
)

// serverToClient forwards the server's messages, firing the armed fault on its COMMIT.
func (p *Proxy) serverToClient(c *pair) {
	r := bufio.NewReader(c.server)
	var delay time.Duration
	for {
		typ, msg, err := readMessage(r)
		if err != nil {
			return
		}
		if typ == 'C' {
			if f := p.match(c, false, msg[5:]); f != nil {
				if f.Action != Latency {
					p.fire(c, f)
					return
				}
				delay = f.Delay
			}
		}
		if delay > 0 {
			time.Sleep(delay)
		}
		if p.swallowed(c) {
			return
		}
		if _, err := c.client.Write(msg); err != nil {
			return
		}
	}
}

// swallowed reports whether a black hole took the connection.
func (p *Proxy) swallowed(c *pair) bool {
	select {
	case <-c.hole:
		return true
	default:
		return false
	}
}

// fire does fault f to c, and reports whether the connection is done with.
func (p *Proxy) fire(c *pair, f *Fault) bool {
	switch f.Action {
	case Cut:
		c.close()
	case BlackHole:
		c.blackHole()
	case Reset:
		if tc, ok := c.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.close()
	case Hook:
		if f.Hook != nil {
			f.Hook()
		}
		c.close()
	default:
		return false
	}
	return true
}

// readMessage reads one typed message, and returns its type and its whole bytes, header
// included.
func readMessage(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > maxMessage {
		return 0, nil, errors.New("message length out of range")
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return head[0], msg, nil
}

// StartFor starts a proxy in front of the server of database URL u, and returns it with u
// pointing at it instead: the same database, user and parameters.
func StartFor(u string) (*Proxy, string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, "", fmt.Errorf("parse the database URL: %w", err)
	}
	p, err := Start(pu.Host)
	if err != nil {
		return nil, "", err
	}
	pu.Host = p.Addr()
	return p, pu.String(), nil
}
