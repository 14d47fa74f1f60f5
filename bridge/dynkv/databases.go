package dynkv

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// Databases is how many logical databases SELECT reaches: Valkey's
// default (its databases setting, 16).
const Databases = 16

// dbPrefix precedes the stored keys of databases other than 0, with the
// database's number and a NUL: database 0's keys are stored as given, so
// the log and images of a server that had one database read the same. A
// database-0 key that begins with it would be read as another database's
// (keys beginning with a NUL byte and "dynkv-db-" are not expected).
const dbPrefix = "\x00dynkv-db-"

// dbKey returns key as stored for database db.
func dbKey(db int, key []byte) []byte {
	if db == 0 {
		return key
	}
	out := append([]byte(dbPrefix), strconv.Itoa(db)...)
	return append(append(out, 0), key...)
}

// keyDB returns the database a stored key belongs to.
func keyDB(stored string) int {
	rest, ok := strings.CutPrefix(stored, dbPrefix)
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, "\x00")
	db, err := strconv.Atoi(digits)
	if !ok || err != nil || db <= 0 || db >= Databases {
		return 0
	}
	return db
}

// inDatabase returns args with the keys at positions keys (indexes into
// args) stored as database db's; args itself is not changed.
func inDatabase(db int, args [][]byte, keys ...int) [][]byte {
	if db == 0 {
		return args
	}
	out := slices.Clone(args)
	for _, i := range keys {
		if i < len(out) {
			out[i] = dbKey(db, out[i])
		}
	}
	return out
}

// allFrom returns the indexes from..n-1.
func allFrom(from, n int) []int {
	var out []int
	for i := from; i < n; i++ {
		out = append(out, i)
	}
	return out
}

// parseDB parses SELECT's index as Valkey parses integers: an optional
// '-', then digits without a leading zero, nothing else.
func parseDB(b []byte) (int64, bool) {
	digits := bytes.TrimPrefix(b, []byte("-"))
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil && digits[0] != '+'
}

// flushDB deletes database db's keys (FLUSHDB) and returns them as stored.
func (e *Engine) flushDB(db int) [][]byte {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	var gone [][]byte
	for k := range e.stores {
		if keyDB(k) == db {
			gone = append(gone, []byte(k))
			delete(e.stores, k)
		}
	}
	slices.SortFunc(gone, bytes.Compare)
	return gone
}

// keysPerDB returns how many keys each database holds.
func (e *Engine) keysPerDB() [Databases]int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var n [Databases]int
	for k := range e.stores {
		n[keyDB(k)]++
	}
	return n
}
