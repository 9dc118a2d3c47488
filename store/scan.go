package store

import "fmt"

// nullString scans a nullable text column into a string, "" for NULL: the
// domain uses zero values where the schema uses NULL.
type nullString struct{ dst *string }

func (n nullString) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.dst = ""
	case string:
		*n.dst = v
	default:
		return fmt.Errorf("scan %T into string", src)
	}
	return nil
}

// nullInt64 scans a nullable bigint into an int64, 0 for NULL.
type nullInt64 struct{ dst *int64 }

func (n nullInt64) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.dst = 0
	case int64:
		*n.dst = v
	default:
		return fmt.Errorf("scan %T into int64", src)
	}
	return nil
}
