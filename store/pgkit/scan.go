package pgkit

import "fmt"

// NullString scans a nullable text column into a string, "" for NULL: the
// domain uses zero values where the schema uses NULL.
type NullString struct{ Dst *string }

func (n NullString) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.Dst = ""
	case string:
		*n.Dst = v
	default:
		return fmt.Errorf("scan %T into string", src)
	}
	return nil
}

// NullInt64 scans a nullable bigint into an int64, 0 for NULL.
type NullInt64 struct{ Dst *int64 }

func (n NullInt64) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.Dst = 0
	case int64:
		*n.Dst = v
	default:
		return fmt.Errorf("scan %T into int64", src)
	}
	return nil
}
