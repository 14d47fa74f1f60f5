package sim

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Grid limits, checked before anything is allocated for them. A replica
// table holds at most 64 lanes, so a grid never needs more sites.
const (
	// MaxGridBytes bounds an RTT matrix file: 64 sites of 64 four-digit
	// cells are about 20 KiB.
	MaxGridBytes = 64 << 10
	// MaxGridSites bounds the sites of a grid (one replica lane each).
	MaxGridSites = 64
	// MaxSiteNameBytes bounds one site name.
	MaxSiteNameBytes = 32
	// MaxRTTms bounds one matrix cell: no terrestrial path takes 10 s.
	MaxRTTms = 10_000
)

// Grid is a WAN model: site names and the symmetric round-trip-time matrix
// between them, in milliseconds (testdata/wan/grid13_rtt_ms.csv is the
// 13-site default). RTTms[i][i] is 0 and RTTms[i][j] = RTTms[j][i].
type Grid struct {
	Sites []string
	RTTms [][]float64
}

// ReadGrid parses an RTT matrix in CSV: a header row "dc,<site>,…", then one
// row per site in the header's order, "<site>,<ms>,…". Cells are finite,
// non-negative numbers of milliseconds, at most MaxRTTms; the matrix must be
// symmetric with a zero diagonal. Input beyond MaxGridBytes, more than
// MaxGridSites sites or a name longer than MaxSiteNameBytes is refused
// before it is parsed. Errors wrap ErrGrid.
func ReadGrid(r io.Reader) (*Grid, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxGridBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read: %w", ErrGrid, err)
	}
	if len(raw) > MaxGridBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrGrid, MaxGridBytes)
	}
	// Every record has one field per site plus the row label, so the comma
	// count of the first line bounds the site count before csv allocates
	// any records.
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	if n := bytes.Count(first, []byte(",")); n > MaxGridSites {
		return nil, fmt.Errorf("%w: %d sites, at most %d", ErrGrid, n, MaxGridSites)
	}
	cr := csv.NewReader(bytes.NewReader(raw))
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrGrid, err)
	}
	if len(header) < 2 || strings.TrimSpace(header[0]) != "dc" {
		return nil, fmt.Errorf("%w: header must be dc,<site>,… with at least one site", ErrGrid)
	}
	g := &Grid{Sites: make([]string, 0, len(header)-1)}
	for _, name := range header[1:] {
		name = strings.TrimSpace(name)
		if err := checkSiteName(name); err != nil {
			return nil, err
		}
		if slices.Contains(g.Sites, name) {
			return nil, fmt.Errorf("%w: site %q named twice", ErrGrid, name)
		}
		g.Sites = append(g.Sites, name)
	}
	n := len(g.Sites)
	g.RTTms = make([][]float64, n)
	for i := range n {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %d rows, want %d", ErrGrid, i, n)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: %w", ErrGrid, i+1, err)
		}
		if got := strings.TrimSpace(rec[0]); got != g.Sites[i] {
			return nil, fmt.Errorf("%w: row %d is %q, want %q (rows follow the header's order)", ErrGrid, i+1, got, g.Sites[i])
		}
		g.RTTms[i] = make([]float64, n)
		for j, cell := range rec[1:] {
			v, err := strconv.ParseFloat(strings.TrimSpace(cell), 64)
			if err != nil || math.IsNaN(v) || v < 0 || v > MaxRTTms {
				return nil, fmt.Errorf("%w: %s→%s = %q is not a number of ms in [0, %d]", ErrGrid, g.Sites[i], g.Sites[j], cell, MaxRTTms)
			}
			g.RTTms[i][j] = v
		}
	}
	if _, err := cr.Read(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more rows than the %d sites", ErrGrid, n)
	}
	for i := range n {
		if g.RTTms[i][i] != 0 {
			return nil, fmt.Errorf("%w: %s→%s = %v, want 0", ErrGrid, g.Sites[i], g.Sites[i], g.RTTms[i][i])
		}
		for j := range i {
			if g.RTTms[i][j] != g.RTTms[j][i] {
				return nil, fmt.Errorf("%w: %s→%s = %v but %s→%s = %v (the matrix must be symmetric)",
					ErrGrid, g.Sites[i], g.Sites[j], g.RTTms[i][j], g.Sites[j], g.Sites[i], g.RTTms[j][i])
			}
		}
	}
	return g, nil
}

func checkSiteName(name string) error {
	if name == "" || len(name) > MaxSiteNameBytes {
		return fmt.Errorf("%w: site name %q must have 1..%d bytes", ErrGrid, name, MaxSiteNameBytes)
	}
	for _, r := range name {
		if r <= ' ' || r == ',' || r == '"' {
			return fmt.Errorf("%w: site name %q holds a space, comma, quote or control character", ErrGrid, name)
		}
	}
	return nil
}

// Index returns the position of site name in g.Sites.
func (g *Grid) Index(name string) (int, bool) {
	i := slices.Index(g.Sites, name)
	return i, i >= 0
}

// Subset returns the grid restricted to the named sites, in the given order.
// Unknown or repeated names are an ErrGrid error.
func (g *Grid) Subset(names []string) (*Grid, error) {
	idx := make([]int, len(names))
	for k, name := range names {
		i, ok := g.Index(name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown site %q (the grid has %s)", ErrGrid, name, strings.Join(g.Sites, ","))
		}
		if slices.Contains(idx[:k], i) {
			return nil, fmt.Errorf("%w: site %q named twice", ErrGrid, name)
		}
		idx[k] = i
	}
	s := &Grid{Sites: slices.Clone(names), RTTms: make([][]float64, len(names))}
	for a, i := range idx {
		s.RTTms[a] = make([]float64, len(names))
		for b, j := range idx {
			s.RTTms[a][b] = g.RTTms[i][j]
		}
	}
	return s, nil
}
