package messaging

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/mux"
	"mellium.im/xmpp/ping"
	"mellium.im/xmpp/stanza"
)

// NS is the XML namespace of the element that carries an envelope inside a
// message stanza: <env xmlns="urn:mlsysops:agent:1" type="...">JSON</env>.
const NS = "urn:mlsysops:agent:1"

var envName = xml.Name{Space: NS, Local: "env"}

// stableSession is how long a session must last for the reconnect backoff
// to start again from its minimum.
const stableSession = 10 * time.Second

// Run connects and keeps the client connected until ctx ends. It returns nil
// after a clean shutdown; messages still unacknowledged then fail with
// ErrClosed. Run may be called once.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("messaging: Run called twice")
	}
	c.running = true
	c.runCtx = ctx
	c.mu.Unlock()
	defer c.m.unregister(c.cfg.Registerer)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.tickLoop(ctx) }()
	go func() { defer wg.Done(); c.heartbeatLoop(ctx) }()

	bo := newBackoff(c.cfg.MinBackoff, c.cfg.MaxBackoff)
	// Refused logins wait longer from the start: each counts towards
	// mod_fail2ban's ban of the host.
	authBo := newBackoff(min(time.Second, c.cfg.AuthBackoff), c.cfg.AuthBackoff)
	sessions := 0
	connectWait := c.cfg.ConnectTimeout
	for ctx.Err() == nil {
		s, err := c.connect(ctx, connectWait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if isTimeout(err) {
				// A server this slow to log us in (a connection storm)
				// gets longer next time: a login given up near its end
				// is lost work for both sides, done again at once.
				connectWait = min(2*connectWait, maxConnectTimeout)
			}
			if classifyDisconnect(err) == disconnectAuth {
				wait := authBo.next()
				c.authFailed(err, wait)
				sleep(ctx, wait)
				continue
			}
			// The next attempt goes to the next server at once; a backoff
			// only after every server failed.
			failed := c.srv.current()
			wait := c.cfg.MinBackoff
			if c.srv.connectFailed() {
				wait = bo.next()
			}
			c.log.Warn("XMPP connect failed", "server", failed, "err", err, "next_server", c.srv.current(), "retry_in", wait)
			sleep(ctx, wait)
			continue
		}
		c.srv.connected()
		connectWait = c.cfg.ConnectTimeout
		authBo.reset()
		c.authOK()
		if sessions > 0 {
			c.m.reconnects.Inc()
		}
		sessions++
		began := time.Now()
		err = c.serve(ctx, s)
		if ctx.Err() != nil {
			break
		}
		kind := classifyDisconnect(err)
		server := c.srv.current()
		var wait time.Duration
		switch {
		case kind == disconnectConflict:
			// Another session took our resource; any node would say so.
			wait = c.cfg.ConflictBackoff
		case kind == disconnectShutdown && !c.srv.several():
			// ejabberd keeps accepting logins for about a second after
			// announcing a shutdown, then drops them silently.
			wait = c.cfg.ShutdownBackoff + time.Duration(rand.Int64N(int64(time.Second)))
		default:
			// A crash, a shutdown, a broken connection: with a cluster,
			// another node serves us at once (a node going down may still
			// accept logins for a second, only to drop them).
			if time.Since(began) > stableSession {
				bo.reset()
			}
			c.srv.moveOn()
			wait = bo.next()
		}
		c.log.Warn("XMPP session ended", "err", err, "kind", kind.String(), "server", server, "next_server", c.srv.current(),
			"lasted", time.Since(began).Round(time.Millisecond), "retry_in", wait)
		sleep(ctx, wait)
	}
	c.out.close()
	wg.Wait()
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// session is one established XMPP session.
type session struct {
	s    *xmpp.Session
	conn net.Conn // the TCP connection under TLS
	once sync.Once

	mu    sync.Mutex
	pings map[string]chan string // pings awaiting their answer, by IQ id
}

// send writes one element with a write deadline (see connect for why
// mellium gets no context).
func (s *session) send(timeout time.Duration, r xml.TokenReader) error {
	_ = s.conn.SetWriteDeadline(time.Now().Add(timeout))
	err := s.s.Send(context.Background(), r)
	_ = s.conn.SetWriteDeadline(time.Time{})
	return err
}

// kill tears the connection down so that Serve returns.
func (s *session) kill() {
	s.once.Do(func() {
		_ = s.s.Conn().Close()
		_ = s.conn.Close()
	})
}

// maxConnectTimeout bounds how long a login may take after earlier ones
// timed out (each doubles the time the next is given).
const maxConnectTimeout = time.Minute

// isTimeout reports whether a login failed because it took too long.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func (c *Client) connect(ctx context.Context, timeout time.Duration) (*session, error) {
	// Read at every attempt: a rotated Secret applies at the next login.
	password, err := c.cfg.password()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoCredentials, err)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 15 * time.Second}
	server := c.srv.current()
	conn, err := d.DialContext(dctx, "tcp", server)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", server, err)
	}
	origin, err := c.jid.WithResource(c.cfg.Resource)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("resource %q: %w", c.cfg.Resource, err)
	}
	features := []xmpp.StreamFeature{
		xmpp.StartTLS(c.tls),
		// No -PLUS mechanisms: ejabberd 23.01 rejects mellium's tls-exporter
		// channel binding on TLS 1.3, and mellium does not fall back.
		xmpp.SASL("", password, sasl.ScramSha256, sasl.ScramSha1),
		bindNamed(c.cfg.Resource),
	}
	// mellium turns a context into connection deadlines from a goroutine
	// that may fire after the call returned when the context is cancelled
	// right afterwards, breaking the next read or write. So mellium only
	// ever gets context.Background(), and timeouts are deadlines set here.
	_ = conn.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	s, err := xmpp.NewSession(context.Background(), c.jid.Domain(), origin, conn, 0,
		xmpp.NewNegotiator(func(*xmpp.Session, *xmpp.StreamConfig) xmpp.StreamConfig {
			return xmpp.StreamConfig{Features: features}
		}))
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		if isSASLError(err) {
			err = fmt.Errorf("%w: %v", errAuth, err)
		}
		return nil, fmt.Errorf("negotiate XMPP session as %s: %w", origin, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return &session{s: s, conn: conn, pings: map[string]chan string{}}, nil
}

// isSASLError recognises mellium's SASL failure, whose type is internal.
func isSASLError(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t := reflect.TypeOf(e); t != nil && strings.Contains(t.PkgPath(), "saslerr") {
			return true
		}
	}
	return false
}

// serve runs one session until it ends and returns why it ended.
func (c *Client) serve(ctx context.Context, s *session) error {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	c.setSession(s)
	defer func() {
		c.setSession(nil)
		c.setConnected(false)
		cancel()
		s.kill()
		wg.Wait()
	}()

	// Initial presence, broadcast to the roster: provisioning links the
	// parent and its children there (subscription both), so each sees the
	// other come and go, and learns the current state again after its own
	// restart through the server's probes. No directed presence on top: the
	// server then sends a second unavailable presence when we leave, which
	// can arrive after our next session's available one.
	if err := c.sendPresence(s, jid.JID{}); err != nil {
		return fmt.Errorf("send initial presence: %w", err)
	}
	c.setConnected(true)
	c.log.Info("XMPP session established", "jid", s.s.LocalAddr().String(), "server", c.srv.current())

	wg.Add(3)
	go func() { defer wg.Done(); c.writeLoop(sctx, s) }()
	go func() { defer wg.Done(); c.keepalive(sctx, s) }()
	go func() {
		defer wg.Done()
		<-sctx.Done()
		if ctx.Err() != nil {
			// Shutting down: close the stream politely and give the server
			// a moment to close its side before cutting the connection.
			_ = s.s.Close()
			time.AfterFunc(2*time.Second, s.kill)
		}
	}()

	m := mux.New(stanza.NSClient, ping.Handle())
	err := s.s.Serve(xmpp.HandlerFunc(func(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
		switch start.Name.Local {
		case "message":
			c.onMessage(t, start)
			return nil
		case "presence":
			c.onPresence(sctx, s, start)
			return nil
		case "iq":
			if s.onIQResult(start) {
				return nil
			}
		}
		// IQs: XMPP ping (without a ping handler ejabberd stops pinging us,
		// so a hung client would go unnoticed), and service-unavailable
		// for the rest.
		return m.HandleXMPP(t, start)
	}))
	return err
}

func (c *Client) setConnected(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connected == up {
		return
	}
	c.connected = up
	if up {
		close(c.upCh)
		c.m.connected.Set(1)
		c.live.resume(time.Now())
		// Anything written to the previous connection may be lost.
		c.out.resendAll("")
	} else {
		c.upCh = make(chan struct{})
		c.m.connected.Set(0)
		c.live.pause()
	}
}

func (c *Client) sendPresence(s *session, to jid.JID) error {
	return s.send(c.cfg.WriteTimeout, stanza.Presence{To: to}.Wrap(nil))
}

// writeLoop is the only writer of envelopes on a session: acknowledgements
// first, then queued messages. Whatever is ready is written in one batch
// and flushed once, which saves a TLS record and a system call per message
// under load.
func (c *Client) writeLoop(ctx context.Context, s *session) {
	batch := make([]frame, 0, maxBatch)
	for {
		for ctx.Err() == nil {
			batch = c.collect(batch[:0])
			if len(batch) == 0 {
				break
			}
			if err := c.writeBatch(s, batch); err != nil {
				// Reliable messages stay in flight and are re-sent on the
				// next session; a lost ack only causes a re-send.
				c.log.Warn("write failed; dropping the connection", "messages", len(batch), "err", err)
				s.kill()
				return
			}
			for _, f := range batch {
				c.m.sent.WithLabelValues(string(f.typ)).Inc()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wakeCh:
		}
	}
}

// maxBatch bounds the stanzas written between two flushes.
const maxBatch = 64

// frame is one stanza to write.
type frame struct {
	to   string
	kind stanza.MessageType
	id   string
	typ  Type
	data []byte
}

// collect appends the frames ready to be written: acknowledgements, then
// queued messages.
func (c *Client) collect(batch []frame) []frame {
	for len(batch) < maxBatch {
		to, a, ok := c.in.takeAck()
		if !ok {
			break
		}
		env := c.newEnvelope(TypeAck)
		env.Payload, _ = json.Marshal(a)
		data, _ := json.Marshal(env)
		batch = append(batch, frame{to: to, kind: stanza.HeadlineMessage, id: env.ID, typ: TypeAck, data: data})
	}
	now := time.Now()
	for len(batch) < maxBatch {
		e, data := c.out.next(now)
		if e == nil {
			break
		}
		kind := stanza.HeadlineMessage // never stored offline
		if e.reliable {
			kind = stanza.ChatMessage // stored offline while the peer is away
		}
		batch = append(batch, frame{to: e.to, kind: kind, id: e.env.ID, typ: e.env.Type, data: data})
	}
	return batch
}

func (c *Client) writeBatch(s *session, batch []frame) error {
	_ = s.conn.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	defer func() { _ = s.conn.SetWriteDeadline(time.Time{}) }()
	w := s.s.TokenWriter()
	for _, f := range batch {
		toJ, err := c.parseJID(f.to)
		if err != nil {
			c.log.Error("dropping a frame with an invalid destination", "to", f.to, "err", err)
			continue
		}
		msg := stanza.Message{To: toJ, Type: f.kind, ID: f.id}.Wrap(
			xmlstream.Wrap(xmlstream.Token(xml.CharData(f.data)), xml.StartElement{Name: envName}))
		if _, err := xmlstream.Copy(w, msg); err != nil {
			w.Close()
			return fmt.Errorf("write %s to %s: %w", f.typ, f.to, err)
		}
	}
	if err := w.Flush(); err != nil {
		w.Close()
		return fmt.Errorf("flush %d messages: %w", len(batch), err)
	}
	return w.Close()
}

// keepalive pings the server so that a connection that died silently (no
// RST, no FIN) is noticed and replaced.
func (c *Client) keepalive(ctx context.Context, s *session) {
	if c.cfg.KeepaliveInterval < 0 {
		return
	}
	t := time.NewTicker(c.cfg.KeepaliveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.ping(ctx, s); err != nil && ctx.Err() == nil {
			c.log.Warn("server did not answer a ping; dropping the connection", "err", err)
			s.kill()
			return
		}
	}
}

// ping sends an XMPP ping to the server and waits for its result, which
// onIQResult picks up (mellium's ping.Send has the context race described in
// connect).
func (c *Client) ping(ctx context.Context, s *session) error {
	_, err := s.ping(ctx, c.jid.Domain(), c.cfg.WriteTimeout, c.cfg.KeepaliveInterval)
	return err
}

// ping sends an XMPP ping to `to` and returns the answer's IQ type
// ("result" or "error").
func (s *session) ping(ctx context.Context, to jid.JID, writeTimeout, wait time.Duration) (string, error) {
	id := "ping-" + randomID(6)
	ch := make(chan string, 1)
	s.mu.Lock()
	s.pings[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pings, id)
		s.mu.Unlock()
	}()
	iq := stanza.IQ{ID: id, Type: stanza.GetIQ, To: to}.Wrap(
		xmlstream.Wrap(nil, xml.StartElement{Name: xml.Name{Space: ping.NS, Local: "ping"}}))
	if err := s.send(writeTimeout, iq); err != nil {
		return "", fmt.Errorf("send ping to %s: %w", to, err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case typ := <-ch:
		return typ, nil
	case <-t.C:
		return "", fmt.Errorf("no answer to ping from %s within %v", to, wait)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// onIQResult completes a keepalive ping; it reports whether it did.
func (s *session) onIQResult(start *xml.StartElement) bool {
	var id, typ string
	for _, a := range start.Attr {
		switch a.Name.Local {
		case "id":
			id = a.Value
		case "type":
			typ = a.Value
		}
	}
	if typ != string(stanza.ResultIQ) && typ != string(stanza.ErrorIQ) {
		return false
	}
	s.mu.Lock()
	ch := s.pings[id]
	delete(s.pings, id)
	s.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- typ
	return true
}

// tickLoop re-sends unacknowledged messages, fails expired ones and checks
// liveness, whether connected or not.
func (c *Client) tickLoop(ctx context.Context) {
	tick := c.cfg.RetryInterval / 4
	if lt := c.cfg.LivenessTimeout / 5; lt < tick {
		tick = lt
	}
	tick = min(max(tick, 10*time.Millisecond), 250*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastExpire := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.out.tick(now, c.Connected())
			evs, probes := c.live.check(now)
			for _, ev := range evs {
				c.emit(&ev)
			}
			for _, p := range probes {
				c.probe(ctx, p)
			}
			if now.Sub(lastExpire) > 10*time.Second {
				c.in.expire(now, c.cfg.DedupTTL)
				lastExpire = now
			}
		}
	}
}

func (c *Client) setSession(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess = s
}

// probe pings a silent child that the server shows connected (see
// tracker): an answer is a sign of life, the server's error for the
// resource means it is gone; without an answer the tracker reports it gone
// at the end of its second timeout.
func (c *Client) probe(ctx context.Context, p probe) {
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	to, err := jid.Parse(p.Peer + "/" + p.Resource)
	if s == nil || err != nil {
		return
	}
	go func() {
		answer, err := s.ping(ctx, to, c.cfg.WriteTimeout, c.cfg.LivenessTimeout)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			c.m.probes.WithLabelValues("unanswered").Inc()
		case answer == string(stanza.ResultIQ):
			c.m.probes.WithLabelValues("answered").Inc()
			c.emit(c.live.seen(p.Peer, "ping", time.Now()))
		default:
			c.m.probes.WithLabelValues("unreachable").Inc()
			c.emit(c.live.unreachable(p.Peer, time.Now()))
		}
	}()
}

// heartbeatLoop sends heartbeats to the parent while connected.
func (c *Client) heartbeatLoop(ctx context.Context) {
	parent := c.peers.parent
	if parent == "" || c.cfg.HeartbeatInterval <= 0 {
		return
	}
	name := c.jid.Localpart()
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.Connected() {
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
		_, err := c.SendAsync(hctx, parent, &Heartbeat{Name: name, UptimeSeconds: int64(time.Since(c.start).Seconds()), Status: "ok"})
		cancel()
		if err != nil && ctx.Err() == nil {
			c.log.Debug("heartbeat not queued", "err", err)
		}
	}
}

// onMessage parses a message stanza. It runs on the session's read loop and
// must not block: work is handed to the sender's worker.
func (c *Client) onMessage(t xml.TokenReader, start *xml.StartElement) {
	var fromAttr, typ string
	for _, a := range start.Attr {
		switch a.Name.Local {
		case "from":
			fromAttr = a.Value
		case "type":
			typ = a.Value
		}
	}
	data, found, err := readEnvelopeElement(start, t)
	if typ == string(stanza.ErrorMessage) {
		// A bounce from the server, e.g. the peer's offline storage is
		// full. The message stays unacknowledged and is re-sent.
		c.m.dropped.WithLabelValues("bounced").Inc()
		c.log.Debug("message bounced by the server", "from", fromAttr)
		return
	}
	if err != nil || !found {
		c.m.dropped.WithLabelValues("malformed").Inc()
		c.log.Warn("message without a readable envelope dropped", "from", fromAttr, "err", err)
		return
	}
	from, err := bareJID(fromAttr)
	if err != nil {
		c.m.dropped.WithLabelValues("malformed").Inc()
		c.log.Warn("message with an invalid sender dropped", "from", fromAttr, "err", err)
		return
	}
	env, err := DecodeEnvelope(data)
	if err != nil {
		c.m.dropped.WithLabelValues("malformed").Inc()
		c.log.Warn("malformed envelope dropped", "from", from, "err", err)
		return
	}
	c.m.received.WithLabelValues(string(env.Type)).Inc()
	if !env.Time.IsZero() {
		c.m.transit.WithLabelValues(string(env.Type)).Observe(time.Since(env.Time).Seconds())
	}
	if env.From != from {
		// The server stamps the stanza's from; an envelope claiming
		// someone else is forged.
		c.m.droppedUnauthorized.WithLabelValues(string(env.Type)).Inc()
		c.log.Warn("forged sender: envelope from does not match the stanza", "from", from, "claimed", env.From, "type", env.Type, "id", env.ID)
		return
	}
	now := time.Now()
	if env.Type == TypeAck {
		if c.peers.role(from) == RoleUnknown && !c.out.knows(from) {
			return
		}
		m, err := env.DecodePayload()
		if err != nil {
			c.m.dropped.WithLabelValues("malformed").Inc()
			c.log.Warn("malformed ack dropped", "from", from, "err", err)
			return
		}
		c.out.ack(from, m.(*Ack), now)
		c.emit(c.live.seen(from, "message", now))
		return
	}
	spec, _ := Lookup(env.Type)
	keep, reason := c.peers.authorize(from, spec, c.correlated(from, env))
	if reason != "" {
		c.m.droppedUnauthorized.WithLabelValues(string(env.Type)).Inc()
		c.log.Warn("unauthorized message refused", "from", from, "type", env.Type, "id", env.ID, "reason", reason)
	}
	if !keep {
		return
	}
	if env.Type == TypeHeartbeat {
		c.emit(c.live.seen(from, "heartbeat", now))
	} else {
		c.emit(c.live.seen(from, "message", now))
	}
	res, startWorker := c.in.receive(from, env, reason, now)
	switch res {
	case pushDuplicate:
		c.m.duplicates.Inc()
	case pushOverflow:
		c.m.dropped.WithLabelValues("overflow").Inc()
	}
	if startWorker {
		go c.worker(from)
	}
}

// readEnvelopeElement returns the text of the first <env/> child of the
// stanza that start opens; t yields the tokens after start.
func readEnvelopeElement(start *xml.StartElement, t xml.TokenReader) ([]byte, bool, error) {
	d := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), t))
	if _, err := d.Token(); err != nil { // the stanza's own start element
		return nil, false, err
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			return nil, false, nil // end of the stanza
		case xml.StartElement:
			if tok.Name != envName {
				if err := d.Skip(); err != nil {
					return nil, false, err
				}
				continue
			}
			var body struct {
				Data []byte `xml:",chardata"`
			}
			if err := d.DecodeElement(&body, &tok); err != nil {
				return nil, false, err
			}
			return body.Data, true, nil
		}
	}
}

// onPresence follows the presence of the parent and the children.
//
// ejabberd sometimes delivers an unavailable presence of a previous session
// (or of a probe) after the available presence of the current one with the
// same full JID, so an unavailable is confirmed with an XMPP ping to that
// full JID before the peer is reported gone: the server answers an error
// for a resource that is not connected, the peer answers if it is.
func (c *Client) onPresence(ctx context.Context, s *session, start *xml.StartElement) {
	var fromAttr, typ string
	for _, a := range start.Attr {
		switch a.Name.Local {
		case "from":
			fromAttr = a.Value
		case "type":
			typ = a.Value
		}
	}
	if fromAttr == "" {
		return
	}
	j, err := jid.Parse(fromAttr)
	if err != nil {
		return
	}
	from := j.Bare().String()
	if from == c.bare || c.peers.role(from) == RoleUnknown {
		return
	}
	c.log.Debug("presence", "from", fromAttr, "type", typ)
	switch typ {
	case "":
		c.emit(c.live.presence(from, j.Resourcepart(), true, time.Now()))
	case string(stanza.UnavailablePresence):
		go func() {
			sleep(ctx, confirmDelay)
			answer, err := s.ping(ctx, j, c.cfg.WriteTimeout, confirmTimeout)
			if ctx.Err() != nil {
				return
			}
			if err == nil && answer == string(stanza.ResultIQ) {
				c.log.Debug("stale unavailable presence ignored: the peer answers", "peer", fromAttr)
				c.emit(c.live.seen(from, "ping", time.Now()))
				return
			}
			c.log.Debug("unavailable presence confirmed", "peer", fromAttr, "answer", answer, "err", err)
			c.emit(c.live.presence(from, j.Resourcepart(), false, time.Now()))
		}()
	}
}

// confirmDelay and confirmTimeout time the ping that confirms an
// unavailable presence: the delay lets the server finish replacing an old
// session by a new one with the same resource, during which it answers for
// neither.
const (
	confirmDelay   = 300 * time.Millisecond
	confirmTimeout = 2 * time.Second
)
