package ws

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// Drop and entry subscriptions (API.md, Drops). Any change of a drop or of
// one of its entries may move every waiting entry of that drop, so a batch
// that touches a drop reads the drop and every watched entry of it once,
// whoever watches them.

// dropWatch is what the hub knows of drop subscriptions; hub.mu guards it.
type dropWatch struct {
	byDrop  map[uuid.UUID]map[*conn]struct{}
	byEntry map[uuid.UUID]map[*conn]struct{}
	// entryDrop and entriesOf say which watched entries each drop has.
	entryDrop map[uuid.UUID]uuid.UUID
	entriesOf map[uuid.UUID]map[uuid.UUID]struct{}
	// Subscriptions to read once more: registered after their snapshot.
	refreshDrops   map[uuid.UUID]struct{}
	refreshEntries map[uuid.UUID]struct{}
	// merchants counts the watched drops and entries of each merchant,
	// whose streams the tailer reads; dropMerchant and entryMerchant say
	// whose each is.
	merchants     map[uuid.UUID]int
	dropMerchant  map[uuid.UUID]uuid.UUID
	entryMerchant map[uuid.UUID]uuid.UUID
}

func newDropWatch() dropWatch {
	return dropWatch{
		byDrop: map[uuid.UUID]map[*conn]struct{}{}, byEntry: map[uuid.UUID]map[*conn]struct{}{},
		entryDrop: map[uuid.UUID]uuid.UUID{}, entriesOf: map[uuid.UUID]map[uuid.UUID]struct{}{},
		refreshDrops: map[uuid.UUID]struct{}{}, refreshEntries: map[uuid.UUID]struct{}{},
		merchants: map[uuid.UUID]int{}, dropMerchant: map[uuid.UUID]uuid.UUID{}, entryMerchant: map[uuid.UUID]uuid.UUID{},
	}
}

func (w *dropWatch) refreshing() bool {
	return len(w.refreshDrops) > 0 || len(w.refreshEntries) > 0
}

func (w *dropWatch) unwatchMerchant(m uuid.UUID) {
	if w.merchants[m]--; w.merchants[m] <= 0 {
		delete(w.merchants, m)
	}
}

func (w *dropWatch) refreshAll() {
	for id := range w.byDrop {
		w.refreshDrops[id] = struct{}{}
	}
	for id := range w.byEntry {
		w.refreshEntries[id] = struct{}{}
	}
}

func (w *dropWatch) watchEntry(c *conn, id, drop, merchant uuid.UUID) {
	if w.byEntry[id] == nil {
		w.byEntry[id] = map[*conn]struct{}{}
		w.entryDrop[id] = drop
		w.entryMerchant[id] = merchant
		w.merchants[merchant]++
		if w.entriesOf[drop] == nil {
			w.entriesOf[drop] = map[uuid.UUID]struct{}{}
		}
		w.entriesOf[drop][id] = struct{}{}
	}
	w.byEntry[id][c] = struct{}{}
}

func (w *dropWatch) unwatchEntry(c *conn, id uuid.UUID) {
	delete(w.byEntry[id], c)
	if len(w.byEntry[id]) > 0 {
		return
	}
	delete(w.byEntry, id)
	drop := w.entryDrop[id]
	delete(w.entryDrop, id)
	w.unwatchMerchant(w.entryMerchant[id])
	delete(w.entryMerchant, id)
	delete(w.entriesOf[drop], id)
	if len(w.entriesOf[drop]) == 0 {
		delete(w.entriesOf, drop)
	}
}

func (w *dropWatch) watchDrop(c *conn, id, merchant uuid.UUID) {
	if w.byDrop[id] == nil {
		w.byDrop[id] = map[*conn]struct{}{}
		w.dropMerchant[id] = merchant
		w.merchants[merchant]++
	}
	w.byDrop[id][c] = struct{}{}
}

func (w *dropWatch) unwatchDrop(c *conn, id uuid.UUID) {
	delete(w.byDrop[id], c)
	if len(w.byDrop[id]) == 0 {
		delete(w.byDrop, id)
		w.unwatchMerchant(w.dropMerchant[id])
		delete(w.dropMerchant, id)
	}
}

// pushDrops sends the new state of every watched drop and entry that a batch
// of changed streams, or a pending refresh, concerns. On error the refreshes
// stay due.
func (h *Hub) pushDrops(ctx context.Context, streams []store.StreamRef) error {
	var changedEntries []uuid.UUID
	drops := map[uuid.UUID]bool{}
	for _, st := range streams {
		switch st.Type {
		case store.StreamDrop:
			drops[st.ID] = true
		case store.StreamDropEntry:
			changedEntries = append(changedEntries, st.ID)
		}
	}
	h.mu.Lock()
	refreshDrops, refreshEntries := h.drops.refreshDrops, h.drops.refreshEntries
	h.drops.refreshDrops, h.drops.refreshEntries = map[uuid.UUID]struct{}{}, map[uuid.UUID]struct{}{}
	watching := len(h.drops.byDrop) > 0 || len(h.drops.byEntry) > 0
	h.mu.Unlock()
	if !watching && len(refreshDrops) == 0 && len(refreshEntries) == 0 {
		return nil
	}
	err := h.readAndOfferDrops(ctx, drops, changedEntries, refreshDrops, refreshEntries)
	if err != nil {
		h.mu.Lock()
		for id := range refreshDrops {
			h.drops.refreshDrops[id] = struct{}{}
		}
		for id := range refreshEntries {
			h.drops.refreshEntries[id] = struct{}{}
		}
		h.mu.Unlock()
	}
	return err
}

func (h *Hub) readAndOfferDrops(ctx context.Context, drops map[uuid.UUID]bool, changedEntries []uuid.UUID,
	refreshDrops, refreshEntries map[uuid.UUID]struct{},
) error {
	if len(changedEntries) > 0 {
		owners, err := h.store.EntryDrops(ctx, changedEntries)
		if err != nil {
			return fmt.Errorf("entry drops: %w", err)
		}
		for _, d := range owners {
			drops[d] = true
		}
	}
	for id := range refreshDrops {
		drops[id] = true
	}
	var readDrops, readEntries []uuid.UUID
	h.mu.Lock()
	wantEntry := map[uuid.UUID]struct{}{}
	for id := range refreshEntries {
		if len(h.drops.byEntry[id]) > 0 {
			wantEntry[id] = struct{}{}
		}
	}
	for d := range drops {
		if len(h.drops.byDrop[d]) > 0 {
			readDrops = append(readDrops, d)
		}
		for e := range h.drops.entriesOf[d] {
			wantEntry[e] = struct{}{}
		}
	}
	h.mu.Unlock()
	readEntries = setKeys(wantEntry)
	var views []store.DropView
	for _, id := range readDrops {
		d, err := h.store.GetDrop(ctx, id)
		if err != nil && domain.ErrorCode(err) != domain.CodeNotFound {
			return fmt.Errorf("read drop: %w", err)
		}
		if d != nil {
			views = append(views, *d)
		}
	}
	entries, err := h.store.EntriesByID(ctx, readEntries)
	if err != nil {
		return fmt.Errorf("read entries: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range entries {
		for c := range h.drops.byEntry[e.ID] {
			c.offerEntry(e)
		}
	}
	for _, d := range views {
		for c := range h.drops.byDrop[d.ID] {
			c.offerDrop(d)
		}
	}
	return nil
}

type entryMessage struct {
	Type  string          `json:"type"`
	Entry store.EntryView `json:"entry"`
}

type dropMessage struct {
	Type string         `json:"type"`
	Drop store.DropView `json:"drop"`
}

type entrySlot struct {
	last    *store.EntryView
	pending *store.EntryView
}

type dropSlot struct {
	last    *store.DropView
	pending *store.DropView
}

// entryNewer reports whether next may follow last: a later version, or the
// same version with a rank or position newly known or a position that fell.
// A client's positions only fall, whatever order reads finish in.
func entryNewer(last, next *store.EntryView) bool {
	switch {
	case last == nil:
		return true
	case next.Version != last.Version:
		return next.Version > last.Version
	case last.Rank == nil && next.Rank != nil:
		return true
	case next.Position == nil || last.Position == nil:
		return false
	default:
		return *next.Position < *last.Position
	}
}

// dropNewer: a later version, or the same version with more entries,
// invitations, purchases or lapses counted.
func dropNewer(last, next *store.DropView) bool {
	switch {
	case last == nil:
		return true
	case next.Version != last.Version:
		return next.Version > last.Version
	}
	total := func(d *store.DropView) int { return d.Entries + d.Invited + d.Purchased + d.Lapsed }
	return total(next) > total(last)
}

// offerEntry leaves e for the writer if it is newer than what the client
// has or is about to get. The caller holds hub.mu.
func (c *conn) offerEntry(e store.EntryView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.entries[e.ID]
	if !ok {
		return
	}
	against := slot.last
	if slot.pending != nil {
		against = slot.pending
	}
	if !entryNewer(against, &e) {
		return
	}
	slot.pending = &e
	c.signal()
}

func (c *conn) offerDrop(d store.DropView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.drops[d.ID]
	if !ok {
		return
	}
	against := slot.last
	if slot.pending != nil {
		against = slot.pending
	}
	if !dropNewer(against, &d) {
		return
	}
	slot.pending = &d
	c.signal()
}

// takeDrops empties the drop and entry slots into messages; the caller
// holds c.mu.
func (c *conn) takeDrops(msgs [][]byte) [][]byte {
	for _, slot := range c.entries {
		if slot.pending == nil {
			continue
		}
		e := slot.pending
		slot.pending, slot.last = nil, e
		if msg, err := json.Marshal(entryMessage{Type: "entry", Entry: *e}); err == nil {
			msgs = append(msgs, msg)
		}
	}
	for _, slot := range c.drops {
		if slot.pending == nil {
			continue
		}
		d := slot.pending
		slot.pending, slot.last = nil, d
		if msg, err := json.Marshal(dropMessage{Type: "drop", Drop: *d}); err == nil {
			msgs = append(msgs, msg)
		}
	}
	return msgs
}

// subscribeEntry checks access with a read of the entry, which is also the
// snapshot; the tailer reads it once more after registering.
func (c *conn) subscribeEntry(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	e, err := c.hub.store.GetEntry(ctx, id, accessOf(c.principal))
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.entries[id]; return known }, func() {
		if c.entries == nil {
			c.entries = map[uuid.UUID]*entrySlot{}
		}
		c.entries[id] = &entrySlot{}
		h.drops.watchEntry(c, id, e.DropID, e.MerchantID)
	}, func() {
		c.offerEntry(*e)
		h.drops.refreshEntries[id] = struct{}{}
	})
}

// subscribeDrop: any authenticated caller may watch a drop.
func (c *conn) subscribeDrop(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	d, err := c.hub.store.GetDrop(ctx, id)
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.drops[id]; return known }, func() {
		if c.drops == nil {
			c.drops = map[uuid.UUID]*dropSlot{}
		}
		c.drops[id] = &dropSlot{}
		h.drops.watchDrop(c, id, d.MerchantID)
	}, func() {
		c.offerDrop(*d)
		h.drops.refreshDrops[id] = struct{}{}
	})
}

// handleDrop handles a message naming an entry or a drop.
func (c *conn) handleDrop(m clientMessage) {
	field, id := "entry_id", m.EntryID
	if m.DropID != "" {
		field, id = "drop_id", m.DropID
	}
	parsed, err := uuid.Parse(id)
	if err != nil {
		c.sendError(domain.CodeNotFound, field+" not found")
		return
	}
	switch {
	case field == "entry_id" && m.Op == "unsubscribe":
		unsubscribe(c.hub, c, &c.entries, parsed, c.hub.drops.unwatchEntry)
	case field == "entry_id":
		c.subscribeEntry(parsed)
	case m.Op == "unsubscribe":
		unsubscribe(c.hub, c, &c.drops, parsed, c.hub.drops.unwatchDrop)
	default:
		c.subscribeDrop(parsed)
	}
}
