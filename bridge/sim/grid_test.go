package sim

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestReadGrid_ShippedMatrix(t *testing.T) {
	g := shippedGrid(t)
	want := []string{"lux", "fra", "ams", "lon", "par", "waw", "ist", "dxb", "iad", "ord", "sjc", "sin", "nrt"}
	if !slices.Equal(g.Sites, want) {
		t.Fatalf("ReadGrid sites = %v, want %v", g.Sites, want)
	}
	lo, hi := 1e9, 0.0
	for i := range g.Sites {
		for j := range g.Sites {
			if i != j {
				lo, hi = min(lo, g.RTTms[i][j]), max(hi, g.RTTms[i][j])
			}
		}
	}
	// The README: 4 ms between the two closest sites, 239 ms between the farthest.
	if lo != 4 || hi != 239 {
		t.Errorf("ReadGrid off-diagonal range = [%v, %v] ms, want [4, 239]", lo, hi)
	}
	fra, _ := g.Index("fra")
	nrt, _ := g.Index("nrt")
	if g.RTTms[fra][nrt] != 232 {
		t.Errorf("RTT fra→nrt = %v, want 232", g.RTTms[fra][nrt])
	}
}

func TestReadGrid_RejectsMalformedInput(t *testing.T) {
	ok := "dc,a,b\na,0,5\nb,5,0\n"
	if _, err := ReadGrid(strings.NewReader(ok)); err != nil {
		t.Fatalf("ReadGrid(%q) = %v, want nil", ok, err)
	}
	wide := "dc" + strings.Repeat(",x", MaxGridSites+1) + "\n"
	cases := map[string]string{
		"empty":            "",
		"no sites":         "dc\n",
		"bad header":       "site,a\na,0\n",
		"asymmetric":       "dc,a,b\na,0,5\nb,6,0\n",
		"nonzero diagonal": "dc,a,b\na,1,5\nb,5,0\n",
		"negative":         "dc,a,b\na,0,-5\nb,-5,0\n",
		"not a number":     "dc,a,b\na,0,x\nb,x,0\n",
		"NaN":              "dc,a,b\na,0,NaN\nb,NaN,0\n",
		"infinite":         "dc,a,b\na,0,Inf\nb,Inf,0\n",
		"too slow":         "dc,a,b\na,0,10001\nb,10001,0\n",
		"row order":        "dc,a,b\nb,5,0\na,0,5\n",
		"missing row":      "dc,a,b\na,0,5\n",
		"extra row":        "dc,a,b\na,0,5\nb,5,0\nc,1,1\n",
		"short row":        "dc,a,b\na,0\nb,5,0\n",
		"duplicate site":   "dc,a,a\na,0,5\na,5,0\n",
		"space in name":    "dc,a b\na b,0\n",
		"long name":        "dc," + strings.Repeat("n", MaxSiteNameBytes+1) + "\n",
		"too many sites":   wide,
		"too many bytes":   ok + strings.Repeat("#", MaxGridBytes),
	}
	for name, in := range cases {
		if _, err := ReadGrid(strings.NewReader(in)); !errors.Is(err, ErrGrid) {
			t.Errorf("%s: ReadGrid(%.40q…) err = %v, want ErrGrid", name, in, err)
		}
	}
}

func TestGrid_SubsetKeepsOrderAndDistances(t *testing.T) {
	g := shippedGrid(t)
	s, err := g.Subset([]string{"nrt", "fra", "iad"})
	if err != nil {
		t.Fatalf("Subset: %v", err)
	}
	want := [][]float64{{0, 232, 145}, {232, 0, 94}, {145, 94, 0}}
	for i := range want {
		if !slices.Equal(s.RTTms[i], want[i]) {
			t.Errorf("Subset row %d (%s) = %v, want %v", i, s.Sites[i], s.RTTms[i], want[i])
		}
	}
	for _, bad := range [][]string{{"fra", "xyz"}, {"fra", "fra"}} {
		if _, err := g.Subset(bad); !errors.Is(err, ErrGrid) {
			t.Errorf("Subset(%v) err = %v, want ErrGrid", bad, err)
		}
	}
}

// formatGrid writes g back as ReadGrid's CSV.
func formatGrid(g *Grid) string {
	var b strings.Builder
	b.WriteString("dc")
	for _, s := range g.Sites {
		b.WriteString("," + s)
	}
	b.WriteString("\n")
	for i, s := range g.Sites {
		b.WriteString(s)
		for _, v := range g.RTTms[i] {
			fmt.Fprintf(&b, ",%v", v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func FuzzReadGrid(f *testing.F) {
	shipped, err := os.ReadFile("../../testdata/wan/grid13_rtt_ms.csv")
	if err != nil {
		f.Fatalf("read shipped grid: %v", err)
	}
	f.Add(string(shipped))
	f.Add("dc,a,b\na,0,5\nb,5,0\n")
	f.Add("dc,a\na,0\n")
	f.Add("dc,a,b\na,0,5.5\nb,5.5,0")
	f.Add("dc,\"a\",b\na,0,1\nb,1,0\n")
	f.Fuzz(func(t *testing.T, in string) {
		g, err := ReadGrid(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrGrid) {
				t.Fatalf("ReadGrid err = %v, want ErrGrid", err)
			}
			return
		}
		// What parses obeys the rules and survives a round trip.
		n := len(g.Sites)
		if n == 0 || n > MaxGridSites || len(g.RTTms) != n {
			t.Fatalf("ReadGrid = %d sites, %d rows", n, len(g.RTTms))
		}
		for i := range n {
			if g.RTTms[i][i] != 0 {
				t.Fatalf("diagonal %d = %v", i, g.RTTms[i][i])
			}
			for j := range n {
				if v := g.RTTms[i][j]; v != g.RTTms[j][i] || v < 0 || v > MaxRTTms {
					t.Fatalf("cell %d,%d = %v (mirror %v)", i, j, v, g.RTTms[j][i])
				}
			}
		}
		again, err := ReadGrid(strings.NewReader(formatGrid(g)))
		if err != nil {
			t.Fatalf("round trip of %q: %v", formatGrid(g), err)
		}
		if !slices.Equal(again.Sites, g.Sites) {
			t.Fatalf("round trip sites = %v, want %v", again.Sites, g.Sites)
		}
		for i := range n {
			if !slices.Equal(again.RTTms[i], g.RTTms[i]) {
				t.Fatalf("round trip row %d = %v, want %v", i, again.RTTms[i], g.RTTms[i])
			}
		}
	})
}
