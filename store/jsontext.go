package store

import (
	"sync"

	fastjson "github.com/segmentio/encoding/json"
)

// jsonBuffers hold jsonText's encodings until they are copied out.
var jsonBuffers = sync.Pool{New: func() any { return new([]byte) }}

// jsonText is v as json.Marshal writes it, byte for byte, through
// segmentio/encoding, which compiles an encoder once a type instead of
// walking every value by reflection: a batch encodes each of its orders'
// events, metadata and items, as the API does their bodies and answers. The
// text is copied out of a reused buffer once, as the string the batch's
// columns hold.
func jsonText(v any) (string, error) {
	buf := jsonBuffers.Get().(*[]byte)
	b, err := fastjson.Append((*buf)[:0], v, fastjson.EscapeHTML|fastjson.SortMapKeys)
	text := string(b)
	*buf = b[:0]
	jsonBuffers.Put(buf)
	return text, err
}
