package pgkit

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// RegisterTypes lets conn send and read google/uuid's UUID, alone and in
// slices, as the sixteen bytes it is, and send the columns of the write
// path's statements without an allocation per element (wrapArrays). pgx
// knows a UUID only as a driver.Valuer and a sql.Scanner: each one sent was
// formatted as text and parsed back, each slice of them walked by
// reflection, and each one read was formatted as text for the UUID to
// parse; the write path sends a column of ids per statement. Use it as a
// pool's AfterConnect.
func RegisterTypes(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
	if jsonb, ok := m.TypeForOID(pgtype.JSONBOID); ok {
		m.RegisterType(&pgtype.Type{Name: jsonb.Name, OID: jsonb.OID, Codec: jsonbCodec{jsonb.Codec}})
	}
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapArrays}, m.TryWrapEncodePlanFuncs...)
	return nil
}

// uuidCodec is pgx's uuid codec that also writes a uuid.UUID and reads a
// binary uuid into one as bytes; every other value it leaves to pgx's.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	switch value.(type) {
	case uuid.UUID, *uuid.UUID:
		if format == pgtype.BinaryFormatCode {
			return encodeUUID{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return scanUUID{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUID struct{}

// Encode is given no nil pointer: pgx sends those as NULL without a plan.
func (encodeUUID) Encode(value any, buf []byte) ([]byte, error) {
	if p, ok := value.(*uuid.UUID); ok {
		return append(buf, p[:]...), nil
	}
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type scanUUID struct{}

// Scan leaves the UUID as it is for NULL, as uuid.UUID's own Scan does.
func (scanUUID) Scan(src []byte, dst any) error {
	if src == nil {
		return nil
	}
	if len(src) != 16 {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	*dst.(*uuid.UUID) = uuid.UUID(src)
	return nil
}
