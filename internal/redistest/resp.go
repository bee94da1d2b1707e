package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// RedisError is an error reply sent by Redis, such as "MOVED 3999 127.0.0.1:7001"
// or "ERR unknown command". It is distinct from network errors, which are
// returned as they come from package net.
type RedisError struct {
	// Msg is the reply without its leading '-' and trailing CRLF.
	Msg string
}

// Error returns the message Redis sent.
func (e *RedisError) Error() string { return e.Msg }

// ErrNil is returned by Do when Redis replies with a null (a missing key for
// GET, for instance), so that a null can be told from an empty string.
var ErrNil = errors.New("redistest: nil reply")

// Conn is one connection speaking RESP2 to a Redis server. It is meant for
// tests that need to control deadlines or keep a connection open; a Conn is
// not safe for concurrent use.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// Dial connects to the Redis server at addr, giving up after timeout.
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c)}, nil
}

// SetDeadline sets the read and write deadline of the connection, as
// net.Conn.SetDeadline does. A command that runs past it fails with an error
// whose Timeout method reports true.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Do sends one command and reads its reply, rendered as a string: simple
// strings and bulk strings as their text, integers in decimal, arrays as
// their elements joined by "\n" (nested arrays are flattened the same way,
// and null elements are empty). An error reply is returned as a *RedisError
// and a null reply as ErrNil.
func (c *Conn) Do(args ...string) (string, error) {
	if err := c.Send(args...); err != nil {
		return "", err
	}
	return c.Receive()
}

// Send writes one command without reading its reply.
func (c *Conn) Send(args ...string) error {
	_, err := c.c.Write(encodeCommand(args))
	return err
}

// Receive reads one reply and renders it as Do does.
func (c *Conn) Receive() (string, error) {
	v, err := readReply(c.r)
	if err != nil {
		return "", err
	}
	if v == nil {
		return "", ErrNil
	}
	return render(v), nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply parses one RESP2 reply. The result is a string (simple or bulk
// string), an int64, a []any, nil for a null, or a *RedisError; a *RedisError
// at the top level is returned as the error.
func readReply(r *bufio.Reader) (any, error) {
	v, err := readValue(r)
	if err != nil {
		return nil, err
	}
	if e, ok := v.(*RedisError); ok {
		return nil, e
	}
	return v, nil
}

// readValue parses one RESP2 value, leaving error replies as values so that
// an error nested inside an array (as EXEC may send) does not end the parse.
func readValue(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("redistest: malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return &RedisError{Msg: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redistest: malformed integer reply %q", line)
		}
		return n, nil
	case '$':
		return readBulk(r, line, body)
	case '*':
		return readArray(r, line, body)
	default:
		return nil, fmt.Errorf("redistest: unexpected reply type %q", line)
	}
}

// readBulk reads the payload of a bulk string whose header line (body
// being its length) was already read, and returns it as a string, or nil
// for a null bulk string.
func readBulk(r *bufio.Reader, line, body string) (any, error) {
	n, err := length(line, body, "bulk")
	if err != nil || n == -1 {
		return nil, err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return string(buf[:n]), nil
}

// readArray reads the elements of an array whose header line (body being
// its length) was already read, and returns them as a []any, or nil for a
// null array.
func readArray(r *bufio.Reader, line, body string) (any, error) {
	n, err := length(line, body, "array")
	if err != nil || n == -1 {
		return nil, err
	}
	items := make([]any, n)
	for i := range items {
		if items[i], err = readValue(r); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// length parses the length of a bulk string or an array (what) from its
// header line's body: -1 for a null one.
func length(line, body, what string) (int, error) {
	n, err := strconv.Atoi(body)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("redistest: malformed %s length %q", what, line)
	}
	return n, nil
}

// render turns a parsed reply into the string form documented on Conn.Do.
func render(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case *RedisError:
		return v.Msg
	case []any:
		parts := make([]string, len(v))
		for i, item := range v {
			parts[i] = render(item)
		}
		return strings.Join(parts, "\n")
	default:
		return fmt.Sprint(v)
	}
}
