package pgkit

import (
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// reserveSend grows conn's send buffer once to about what queries' messages
// take, before pgx writes them into it. pgx starts that buffer afresh at
// 1 KiB after every round trip that wrote more, and a batch's Bind messages,
// which carry its parameters (a placement batch's events' JSON among them),
// would regrow it by doubling, copying what it holds each time. An estimate
// too small only leaves the last doublings to pgx; one too large holds the
// difference until the round trip is written.
func reserveSend(conn *pgx.Conn, queries []*pgx.QueuedQuery) {
	if n := sendSize(queries); n > minReserve {
		conn.PgConn().Frontend().Send(reserve(n))
	}
}

// sendSize is about what queries' messages take.
func sendSize(queries []*pgx.QueuedQuery) int {
	n := 0
	for _, q := range queries {
		n += queryMessagesSize
		for _, a := range q.Arguments {
			n += 8 + argSize(a)
		}
	}
	return n
}

// queryMessagesSize is about what a statement's Bind, Describe and Execute
// take besides its parameters: their headers, the prepared statement's name
// and a result format code for each column.
const queryMessagesSize = 256

// minReserve is pgx's own starting buffer: below it there is nothing to grow.
const minReserve = 1024

// argSize is about what a parameter takes in binary (at most, for the
// arrays the write path sends, their headers included); any other type is
// taken for a small scalar.
func argSize(a any) int {
	switch v := a.(type) {
	case string:
		return len(v)
	case []byte:
		return len(v)
	case []string:
		return textsSize(v)
	case [][]byte:
		n := 20 + 4*len(v)
		for _, t := range v {
			n += len(t)
		}
		return n
	case []pgtype.Text:
		n := 20 + 5*len(v)
		for _, t := range v {
			n += len(t.String)
		}
		return n
	case []uuid.UUID:
		return 20 + 20*len(v)
	case [][16]byte:
		return 20 + 20*len(v)
	case []pgtype.UUID:
		return 20 + 20*len(v)
	case []bool:
		return 20 + 5*len(v)
	case []pgtype.Int4:
		return 20 + 8*len(v)
	case []time.Time:
		return 20 + 12*len(v)
	case []pgtype.Timestamptz:
		return 20 + 12*len(v)
	case []int64:
		return 20 + 12*len(v)
	case []pgtype.Int8:
		return 20 + 12*len(v)
	case []int32:
		return 20 + 8*len(v)
	}
	return 16
}

// reserve is a message that writes nothing and leaves the buffer grown to
// hold its size more: pgproto3.Frontend.Send hands a message the buffer to
// append to, which is the one way to reach it.
type reserve int

func (r reserve) Encode(dst []byte) ([]byte, error) { return slices.Grow(dst, int(r)), nil }

func (reserve) Decode([]byte) error { return errors.New("pgkit: reserve is never received") }

func (reserve) Frontend() {}

var _ pgproto3.FrontendMessage = reserve(0)
