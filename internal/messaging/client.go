package messaging

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/xmpp/jid"
)

// Handler handles one message type. It runs once per message, in the order
// the sender sent them, one at a time per sender. For a request (env.Reply)
// the returned message is sent back as the response; an error becomes an
// error response. For other messages the result is ignored and an error is
// only logged: the message is acknowledged either way, so handlers must deal
// with their own failures (retry, report status) rather than rely on a
// re-delivery.
type Handler func(ctx context.Context, env *Envelope, msg Message) (Message, error)

// HandleFunc registers a handler typed by its payload, e.g.
//
//	messaging.HandleFunc(c, func(ctx context.Context, env *messaging.Envelope, m *messaging.ComponentPlaced) (messaging.Message, error) {...})
func HandleFunc[T any, PT interface {
	*T
	Message
}](c *Client, h func(ctx context.Context, env *Envelope, msg PT) (Message, error)) {
	c.Handle(PT(new(T)).MessageType(), func(ctx context.Context, env *Envelope, msg Message) (Message, error) {
		return h(ctx, env, msg.(PT))
	})
}

// RemoteError is returned by Request when the peer's handler failed.
type RemoteError struct {
	Peer, Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s answered with an error: %s", e.Peer, e.Message)
}

// Client is one agent's messaging endpoint. Create it with New, register
// handlers, then call Run; Send, Request and Notify may be called from any
// goroutine, before or during Run (messages wait in the bounded queue until
// a session is up).
type Client struct {
	cfg    Config
	log    *slog.Logger
	jid    jid.JID
	bare   string
	stream string
	tls    *tls.Config
	m      *metrics
	srv    *servers
	peers  *peers
	live   *tracker
	out    *outbox
	in     *inbox
	wakeCh chan struct{}
	events chan PeerEvent
	idSeq  atomic.Uint64
	start  time.Time

	jidCache sync.Map // string -> jid.JID

	mu        sync.Mutex
	auth      AuthStatus
	handlers  map[Type]Handler
	pending   map[string]*pendingRequest
	connected bool
	sess      *session      // the current session, nil between sessions
	upCh      chan struct{} // closed while connected
	running   bool
	runCtx    context.Context
}

type pendingRequest struct {
	to string
	ch chan *Envelope
}

// New validates cfg and returns a client that is not yet connected.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("messaging config: %w", err)
	}
	cfg = cfg.withDefaults()
	j, err := jid.Parse(cfg.JID)
	if err != nil {
		return nil, fmt.Errorf("messaging config: JID %q: %w", cfg.JID, err)
	}
	tlsCfg, err := tlsConfig(cfg, j.Domainpart())
	if err != nil {
		return nil, err
	}
	norm := func(list []string) ([]string, error) {
		out := make([]string, 0, len(list))
		for _, s := range list {
			b, err := bareJID(s)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, nil
	}
	controllers, err := norm(cfg.Controllers)
	if err != nil {
		return nil, fmt.Errorf("messaging config: controllers: %w", err)
	}
	children, err := norm(cfg.Children)
	if err != nil {
		return nil, fmt.Errorf("messaging config: children: %w", err)
	}
	parent := ""
	if cfg.Parent != "" {
		if parent, err = bareJID(cfg.Parent); err != nil {
			return nil, fmt.Errorf("messaging config: parent: %w", err)
		}
	}
	c := &Client{
		cfg:      cfg,
		jid:      j.Bare(),
		bare:     j.Bare().String(),
		stream:   randomID(8),
		tls:      tlsCfg,
		srv:      newServers(cfg.Servers, j.Bare().String()+"/"+cfg.Resource),
		peers:    newPeers(parent, controllers, children, cfg.AcceptSubscribe),
		live:     newTracker(cfg.LivenessTimeout),
		wakeCh:   make(chan struct{}, 1),
		events:   make(chan PeerEvent, cfg.EventBuffer),
		handlers: map[Type]Handler{},
		pending:  map[string]*pendingRequest{},
		upCh:     make(chan struct{}),
		start:    time.Now(),
	}
	c.log = cfg.Logger.With("component", "messaging", "agent", c.bare)
	c.out = newOutbox(c.stream, cfg.QueueSize, cfg.Window, func(attempts int) time.Duration {
		return retryDelay(cfg.RetryInterval, cfg.MaxRetryInterval, attempts)
	}, cfg.MaxRetryInterval, c.wake)
	c.in = newInbox(cfg.Window, cfg.DedupSize, cfg.DedupTTL, c.wake)
	c.m = newMetrics(c.bare, func() float64 { return float64(c.out.depth()) })
	c.out.onRetry = func(e *outEntry) { c.m.retried.WithLabelValues(string(e.env.Type)).Inc() }
	c.out.onFinish = func(e *outEntry, err error) {
		var rej *RejectedError
		switch {
		case err == nil:
			if e.reliable {
				c.m.acked.Inc()
			}
		case errors.As(err, &rej):
			c.m.failed.WithLabelValues("rejected").Inc()
		case errors.Is(err, ErrDeliveryTimeout):
			c.m.failed.WithLabelValues("timeout").Inc()
		case errors.Is(err, ErrClosed):
			c.m.failed.WithLabelValues("closed").Inc()
		default:
			c.m.failed.WithLabelValues("other").Inc()
		}
	}
	c.out.onExpired = func(e *outEntry) {
		if e.reliable {
			// Logged here, where the attempts are known; the caller gets
			// ErrDeliveryTimeout.
			c.log.Warn("message not acknowledged before its deadline", "to", e.to, "type", e.env.Type,
				"id", e.env.ID, "attempts", e.attempts)
		}
	}
	if err := c.m.register(cfg.Registerer); err != nil {
		return nil, fmt.Errorf("register messaging metrics: %w", err)
	}
	if parent != "" {
		c.live.track(parent, RoleParent)
	}
	for _, ch := range children {
		c.live.track(ch, RoleChild)
	}
	return c, nil
}

func tlsConfig(cfg Config, domain string) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: domain}
	if cfg.TLSServerName != "" {
		t.ServerName = cfg.TLSServerName
	}
	if cfg.InsecureSkipVerify {
		t.InsecureSkipVerify = true //nolint:gosec // explicit opt-in for throw-away servers
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read XMPP CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("XMPP CA file %s holds no PEM certificate", cfg.CAFile)
		}
		t.RootCAs = pool
	}
	return t, nil
}

// JID returns the client's bare JID.
func (c *Client) JID() string { return c.bare }

// Handle registers h for message type t, replacing any earlier handler. It
// panics when t is not in the catalogue or is a transport type, which is a
// programming error.
func (c *Client) Handle(t Type, h Handler) {
	spec, ok := Lookup(t)
	if !ok || spec.Direction == DirectionInternal {
		panic(fmt.Sprintf("messaging: cannot handle type %q", t))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers[t] = h
}

func (c *Client) handler(t Type) Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handlers[t]
}

// AddChild starts accepting reports from j and following its liveness. It
// returns whether j was new.
func (c *Client) AddChild(j string) (bool, error) {
	b, err := bareJID(j)
	if err != nil {
		return false, err
	}
	added := c.peers.addChild(b)
	c.live.track(b, RoleChild)
	return added, nil
}

// RemoveChild stops accepting reports from j.
func (c *Client) RemoveChild(j string) {
	b, err := bareJID(j)
	if err != nil {
		return
	}
	c.peers.removeChild(b)
	c.live.untrack(b)
}

// Children returns the known children's bare JIDs, sorted.
func (c *Client) Children() []string { return c.peers.childList() }

// Role returns what j is to this agent.
func (c *Client) Role(j string) Role {
	b, err := bareJID(j)
	if err != nil {
		return RoleUnknown
	}
	return c.peers.role(b)
}

// Events delivers liveness changes of the parent and the children. Events
// are dropped (and counted) when the channel is full; PeerStates gives the
// full picture at any time.
func (c *Client) Events() <-chan PeerEvent { return c.events }

// PeerStates returns the liveness of the parent and every child.
func (c *Client) PeerStates() []PeerState { return c.live.states() }

// Server is the c2s address of the current session, or of the next
// connection attempt while there is none.
func (c *Client) Server() string { return c.srv.current() }

// Connected reports whether a session is established.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// WaitConnected blocks until a session is established or ctx ends.
func (c *Client) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	ch := c.upCh
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for XMPP session of %s: %w", c.bare, ctx.Err())
	}
}

// QueueDepth returns the number of messages held (queued, in flight or
// awaiting acknowledgement).
func (c *Client) QueueDepth() int { return c.out.depth() }

func (c *Client) wake() {
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

func (c *Client) newEnvelope(t Type) *Envelope {
	return &Envelope{
		V:     Version,
		ID:    c.stream + "-" + strconv.FormatUint(c.idSeq.Add(1), 36),
		Type:  t,
		From:  c.bare,
		Layer: c.cfg.Layer,
		Time:  time.Now().UTC(),
	}
}

func (c *Client) parseJID(s string) (jid.JID, error) {
	if v, ok := c.jidCache.Load(s); ok {
		return v.(jid.JID), nil
	}
	j, err := jid.Parse(s)
	if err != nil {
		return jid.JID{}, err
	}
	c.jidCache.Store(s, j)
	return j, nil
}

// SendAsync queues msg for `to` and returns at once with a Delivery to wait
// on. It blocks only while the queue is full (back-pressure), until ctx ends.
// The delivery deadline is ctx's deadline, or DeliveryTimeout from now.
func (c *Client) SendAsync(ctx context.Context, to string, msg Message) (*Delivery, error) {
	env, err := c.prepare(msg, "")
	if err != nil {
		return nil, err
	}
	spec, _ := Lookup(env.Type)
	return c.enqueue(ctx, to, env, spec.Delivery == Reliable)
}

// Send delivers msg to `to`. For reliable types it waits until the receiver
// acknowledged the message (its handler ran), the deadline (ctx's, or
// DeliveryTimeout) passed, or the receiver refused it (*RejectedError).
// Best-effort types return once queued.
func (c *Client) Send(ctx context.Context, to string, msg Message) error {
	d, err := c.SendAsync(ctx, to, msg)
	if err != nil {
		return err
	}
	spec, _ := Lookup(msg.MessageType())
	if spec.Delivery != Reliable {
		return nil
	}
	return d.Wait(ctx)
}

// Request sends msg reliably and waits for the correlated response, until
// ctx's deadline or RequestTimeout. A failed handler on the other side gives
// a *RemoteError.
func (c *Client) Request(ctx context.Context, to string, msg Message) (Message, *Envelope, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	env, err := c.prepare(msg, "")
	if err != nil {
		return nil, nil, err
	}
	env.Reply = true
	peer, err := bareJID(to)
	if err != nil {
		return nil, nil, err
	}
	pr := &pendingRequest{to: peer, ch: make(chan *Envelope, 1)}
	c.mu.Lock()
	c.pending[env.ID] = pr
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, env.ID)
		c.mu.Unlock()
	}()
	d, err := c.enqueue(ctx, peer, env, true)
	if err != nil {
		return nil, nil, err
	}
	done := d.Done()
	for {
		select {
		case r := <-pr.ch:
			m, err := r.DecodePayload()
			if err != nil {
				return nil, r, fmt.Errorf("response from %s to %s: %w", peer, env.Type, err)
			}
			if er, ok := m.(*ErrorReply); ok {
				return nil, r, &RemoteError{Peer: peer, Message: er.Message}
			}
			return m, r, nil
		case <-done:
			if err := d.Err(); err != nil {
				return nil, nil, fmt.Errorf("request %s to %s: %w", env.Type, peer, err)
			}
			done = nil // acknowledged; the response is on its way
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("request %s to %s: no response: %w", env.Type, peer, ctx.Err())
		}
	}
}

func (c *Client) prepare(msg Message, corr string) (*Envelope, error) {
	if msg == nil {
		return nil, errors.New("messaging: nil message")
	}
	spec, ok := Lookup(msg.MessageType())
	if !ok || spec.Direction == DirectionInternal && msg.MessageType() != TypeError {
		return nil, fmt.Errorf("messaging: cannot send type %q", msg.MessageType())
	}
	payload, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", spec.Type, err)
	}
	if len(payload) > MaxPayloadSize {
		return nil, fmt.Errorf("%s payload of %d bytes exceeds the %d-byte limit", spec.Type, len(payload), MaxPayloadSize)
	}
	env := c.newEnvelope(spec.Type)
	env.CorrelationID = corr
	env.Payload = payload
	return env, nil
}

func (c *Client) enqueue(ctx context.Context, to string, env *Envelope, reliable bool) (*Delivery, error) {
	peer, err := bareJID(to)
	if err != nil {
		return nil, err
	}
	if peer == c.bare {
		return nil, fmt.Errorf("messaging: %s cannot send to itself", c.bare)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.cfg.DeliveryTimeout)
	}
	env.Expires = deadline.UTC()
	d := &Delivery{id: env.ID, done: make(chan struct{})}
	e := &outEntry{env: env, to: peer, reliable: reliable, deadline: deadline, d: d}
	if err := c.out.add(ctx, e); err != nil {
		return nil, fmt.Errorf("queue %s for %s: %w", env.Type, peer, err)
	}
	return d, nil
}

// reply sends the response to a request; it runs on the sender's worker.
func (c *Client) reply(req *Envelope, to string, resp Message, herr error) {
	if herr != nil {
		resp = &ErrorReply{Message: herr.Error()}
	} else if resp == nil {
		resp = &ErrorReply{Message: fmt.Sprintf("handler for %s returned no response", req.Type)}
	}
	env, err := c.prepare(resp, req.ID)
	if err != nil {
		c.log.Error("cannot encode response", "to", to, "type", req.Type, "id", req.ID, "err", err)
		env, _ = c.prepare(&ErrorReply{Message: "response could not be encoded"}, req.ID)
	}
	ctx, cancel := context.WithTimeout(c.ctx(), c.cfg.DeliveryTimeout)
	defer cancel()
	if _, err := c.enqueue(ctx, to, env, true); err != nil {
		c.log.Error("cannot queue response", "to", to, "type", req.Type, "id", req.ID, "err", err)
	}
}

func (c *Client) ctx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runCtx != nil {
		return c.runCtx
	}
	return context.Background()
}

// worker runs the handlers of one sender's messages, in order.
func (c *Client) worker(from string) {
	for {
		d, ok := c.in.take(from)
		if !ok {
			return
		}
		c.deliver(from, d)
	}
}

func (c *Client) deliver(from string, d delivery) {
	// A refusal decided on arrival was logged then.
	env, reason, logged := d.env, d.reject, d.reject != ""
	log := c.log.With("from", from, "type", env.Type, "id", env.ID)
	now := time.Now()
	if reason == "" && !env.Expires.IsZero() && now.After(env.Expires) {
		reason = "expired before it could be handled"
		c.m.dropped.WithLabelValues("expired").Inc()
	}
	var msg Message
	if reason == "" {
		var err error
		if msg, err = env.DecodePayload(); err != nil {
			reason = err.Error()
			c.m.dropped.WithLabelValues("malformed").Inc()
		}
	}
	if reason == "" && env.CorrelationID != "" && c.resolve(from, env) {
		c.in.done(from, env, "", time.Now())
		return
	}
	var h Handler
	if reason == "" {
		if h = c.handler(env.Type); h == nil {
			if env.Type == TypeHeartbeat {
				// Heartbeats already did their work in the liveness tracker.
				c.in.done(from, env, "", time.Now())
				return
			}
			reason = "no handler for " + string(env.Type)
		}
	}
	if reason != "" {
		if !logged {
			log.Warn("message refused", "reason", reason)
		}
		c.in.done(from, env, reason, time.Now())
		return
	}
	resp, err := c.call(h, env, msg)
	if err != nil {
		c.m.handlerErrors.WithLabelValues(string(env.Type)).Inc()
		log.Error("handler failed", "err", err)
	}
	if env.Reply {
		c.reply(env, from, resp, err)
	}
	c.in.done(from, env, "", time.Now())
}

func (c *Client) call(h Handler, env *Envelope, msg Message) (resp Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return h(c.ctx(), env, msg)
}

// resolve hands a response to the waiting Request. It reports whether env
// was a response (delivered, or late and dropped).
func (c *Client) resolve(from string, env *Envelope) bool {
	c.mu.Lock()
	pr := c.pending[env.CorrelationID]
	if pr != nil && pr.to == from {
		delete(c.pending, env.CorrelationID)
	}
	c.mu.Unlock()
	if pr == nil || pr.to != from {
		if spec, _ := Lookup(env.Type); spec.Response {
			c.log.Debug("late response dropped", "from", from, "type", env.Type, "corr", env.CorrelationID)
			return true
		}
		return false
	}
	pr.ch <- env
	return true
}

func (c *Client) correlated(from string, env *Envelope) bool {
	if env.CorrelationID == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.pending[env.CorrelationID]
	return pr != nil && pr.to == from
}

func (c *Client) emit(ev *PeerEvent) {
	if ev == nil {
		return
	}
	state := "offline"
	if ev.Online {
		state = "online"
	}
	c.m.peerEvents.WithLabelValues(state).Inc()
	c.log.Info("peer "+state, "peer", ev.Peer, "role", ev.Role, "reason", ev.Reason)
	if ev.Online && !ev.first {
		// The peer is back: whatever waits for it can go now rather than at
		// its next re-send time.
		c.out.resendAll(ev.Peer)
	}
	select {
	case c.events <- *ev:
	default:
		c.m.dropped.WithLabelValues("event_overflow").Inc()
		c.log.Warn("liveness event dropped: events channel full", "peer", ev.Peer, "online", ev.Online)
	}
}
