package ws

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// conn is one client. Only writeLoop writes to the socket (gorilla allows
// one writer); everything else offers messages to its bounded channel, and a
// client too slow to keep it drained is dropped rather than slowing others.
type conn struct {
	hub       *Hub
	ws        *websocket.Conn
	principal auth.Principal
	send      chan []byte
	done      chan struct{}
	closeOnce sync.Once

	// Guarded by hub.mu.
	orders    map[uuid.UUID]sent
	merchants map[uuid.UUID]struct{}
}

// sent is the last state a client got for an order: it never gets an older one.
type sent struct {
	version  int
	position int // 0 when not queued
	eta      int
	status   domain.OrderStatus
}

func stateOf(o store.Order) sent {
	s := sent{version: o.Version, status: o.Status}
	if o.QueuePosition != nil {
		s.position = *o.QueuePosition
	}
	if o.EtaSeconds != nil {
		s.eta = *o.EtaSeconds
	}
	return s
}

// newer reports whether next should be sent after last: a higher version, or
// the same version with the queue moved forward or the estimate changed.
func newer(last, next sent, known bool) bool {
	if !known {
		return true
	}
	switch {
	case next.version != last.version:
		return next.version > last.version
	case next.position != last.position:
		return next.position != 0 && next.position < last.position
	default:
		return next.eta != last.eta
	}
}

// offerOrder queues the order's state if it is newer than what the client
// has. The caller holds hub.mu.
func (c *conn) offerOrder(o store.Order) {
	last, known := c.orders[o.ID]
	next := stateOf(o)
	if !newer(last, next, known && last.version > 0) {
		return
	}
	c.orders[o.ID] = next
	msg, err := json.Marshal(orderMessage{Type: "order", Order: o})
	if err != nil {
		return
	}
	c.offer(msg)
}

func (c *conn) offer(msg []byte) {
	select {
	case c.send <- msg:
	case <-c.done:
	default:
		go c.close(websocket.ClosePolicyViolation, "too slow: updates were not read in time")
	}
}

func (c *conn) close(code int, reason string) {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(writeWait))
		_ = c.ws.Close()
	})
}

func (c *conn) writeLoop() {
	defer c.hub.wg.Done()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-c.done:
			return
		case msg := <-c.send:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
				c.close(websocket.CloseAbnormalClosure, "write failed")
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				c.close(websocket.CloseAbnormalClosure, "ping failed")
				return
			}
		}
	}
}

type clientMessage struct {
	Op         string `json:"op"`
	OrderID    string `json:"order_id"`
	MerchantID string `json:"merchant_id"`
}

func (c *conn) readLoop() {
	defer c.hub.wg.Done()
	defer c.hub.remove(c)
	defer c.close(websocket.CloseNormalClosure, "")
	c.ws.SetReadLimit(maxMessageBytes)
	_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				c.close(websocket.CloseMessageTooBig, "messages are limited to 4 KiB")
			}
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
		var m clientMessage
		if err := json.Unmarshal(data, &m); err != nil {
			c.sendError(domain.CodeMalformedJSON, "messages must be JSON objects like {\"op\":\"subscribe\",\"order_id\":\"...\"}")
			continue
		}
		c.handle(m)
	}
}

func (c *conn) sendError(code domain.Code, detail string) {
	msg, _ := json.Marshal(errorMessage{Type: "error", Code: code, Detail: detail})
	c.offer(msg)
}

func (c *conn) handle(m clientMessage) {
	if m.Op != "subscribe" && m.Op != "unsubscribe" {
		c.sendError(domain.CodeValidation, "op must be subscribe or unsubscribe")
		return
	}
	switch {
	case m.OrderID != "" && m.MerchantID == "":
		id, err := uuid.Parse(m.OrderID)
		if err != nil {
			c.sendError(domain.CodeNotFound, "order not found")
			return
		}
		if m.Op == "unsubscribe" {
			c.hub.unsubscribeOrder(c, id)
			return
		}
		c.subscribeOrder(id)
	case m.MerchantID != "" && m.OrderID == "":
		id, err := uuid.Parse(m.MerchantID)
		if err != nil {
			c.sendError(domain.CodeNotFound, "merchant not found")
			return
		}
		if m.Op == "unsubscribe" {
			c.hub.unsubscribeMerchant(c, id)
			return
		}
		c.subscribeMerchant(id)
	default:
		c.sendError(domain.CodeValidation, "give exactly one of order_id and merchant_id")
	}
}

func accessOf(p auth.Principal) store.Access {
	return store.Access{Actor: p.Actor(), Subject: p.Subject, MerchantID: p.MerchantID}
}

func (c *conn) subscribeOrder(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o, err := c.hub.store.GetOrder(ctx, id, accessOf(c.principal))
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := c.orders[id]; !ok && len(c.orders)+len(c.merchants) >= maxSubscriptions {
		msg, _ := json.Marshal(errorMessage{Type: "error", Code: domain.CodeValidation, Detail: "too many subscriptions on one connection"})
		c.offer(msg)
		return
	}
	if _, ok := c.orders[id]; !ok {
		c.orders[id] = sent{}
		if h.byOrder[id] == nil {
			h.byOrder[id] = map[*conn]struct{}{}
		}
		h.byOrder[id][c] = struct{}{}
	}
	c.offerOrder(*o)
}

func (c *conn) subscribeMerchant(id uuid.UUID) {
	if !c.principal.ActsForMerchant(id) {
		c.sendError(domain.CodeForbidden, "only that merchant or an admin may watch its load")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := c.hub.store.GetMerchant(ctx, id)
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := c.merchants[id]; !ok && len(c.orders)+len(c.merchants) >= maxSubscriptions {
		msg, _ := json.Marshal(errorMessage{Type: "error", Code: domain.CodeValidation, Detail: "too many subscriptions on one connection"})
		c.offer(msg)
		return
	}
	c.merchants[id] = struct{}{}
	if h.byMerch[id] == nil {
		h.byMerch[id] = map[*conn]struct{}{}
	}
	h.byMerch[id][c] = struct{}{}
	msg, _ := json.Marshal(loadMessage(id, m.Load))
	c.offer(msg)
}

func (h *Hub) unsubscribeOrder(c *conn, id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(c.orders, id)
	delete(h.byOrder[id], c)
	if len(h.byOrder[id]) == 0 {
		delete(h.byOrder, id)
	}
}

func (h *Hub) unsubscribeMerchant(c *conn, id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(c.merchants, id)
	delete(h.byMerch[id], c)
	if len(h.byMerch[id]) == 0 {
		delete(h.byMerch, id)
	}
}
