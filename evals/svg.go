package evals

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// hslHex converts a colour from HSL (hue in degrees, saturation and
// lightness in 0..1) to #rrggbb: SVG 1.1 renderers do not all accept hsl().
func hslHex(h, s, l float64) string {
	c := (1 - math.Abs(2*l-1)) * s
	hp := math.Mod(h, 360) / 60
	x := c * (1 - math.Abs(math.Mod(hp, 2)-1))
	var r, g, b float64
	switch {
	case hp < 1:
		r, g, b = c, x, 0
	case hp < 2:
		r, g, b = x, c, 0
	case hp < 3:
		r, g, b = 0, c, x
	case hp < 4:
		r, g, b = 0, x, c
	case hp < 5:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	m := l - c/2
	to := func(v float64) int { return int(math.Round((v + m) * 255)) }
	return fmt.Sprintf("#%02x%02x%02x", to(r), to(g), to(b))
}

// cellRole says how a confusion cell should be read, which picks its hue.
func cellRole(truth, said string) (label string, hue int) {
	switch {
	case said == SaidInvalid:
		return "no valid verdict", 280
	case said == SaidUnknown:
		return "abstained", 38
	case truth == said:
		return "correct", 140
	case said == SaidNone:
		return "UNSAFE-NONE", 0
	default:
		return "UNSAFE-OCCURRED", 0
	}
}

// ConfusionSVG draws the confusion matrix as a labelled heat map: one cell
// per truth × said pair, shaded by the share of its row, with the count,
// the row share and what the cell means written in it. The markup is
// hand-written so the chart needs no plotting library.
func ConfusionSVG(rep *Report) string {
	const (
		left, top  = 190, 110
		cellW      = 140
		cellH      = 96
		width      = left + 4*cellW + 40
		height     = top + 2*cellH + 130
		fontFamily = "DejaVu Sans, Helvetica, Arial, sans-serif"
	)
	m := rep.Metrics
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", width, height, width, height, fontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	title := fmt.Sprintf("Confusion matrix — supervisor %s", rep.Supervisor)
	fmt.Fprintf(&b, `<text x="%d" y="32" font-size="20" font-weight="bold" fill="#111">%s</text>`+"\n", 20, html.EscapeString(title))
	sub := fmt.Sprintf("model %s · prompt %s · %d walls, %d operations · %s", orDash(rep.Model), orDash(rep.PromptVersion), m.Walls, m.Operations, rep.Fixtures)
	fmt.Fprintf(&b, `<text x="20" y="54" font-size="12" fill="#444">%s</text>`+"\n", html.EscapeString(sub))

	// Axis titles.
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" font-weight="bold" text-anchor="middle" fill="#222">supervisor said →</text>`+"\n", left+2*cellW, top-38)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" font-weight="bold" text-anchor="middle" fill="#222" transform="rotate(-90 %d %d)">truth</text>`+"\n", 30, top+cellH, 30, top+cellH)

	for j, s := range SaidValues {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" text-anchor="middle" fill="#222">%s</text>`+"\n", left+j*cellW+cellW/2, top-12, s)
	}
	for i, t := range TruthValues {
		rowTotal := 0
		for _, s := range SaidValues {
			rowTotal += m.Confusion[t][s]
		}
		y := top + i*cellH
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" text-anchor="end" fill="#222">%s</text>`+"\n", left-12, y+cellH/2, t)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end" fill="#666">%d ops</text>`+"\n", left-12, y+cellH/2+16, rowTotal)
		for j, s := range SaidValues {
			n := m.Confusion[t][s]
			share := 0.0
			if rowTotal > 0 {
				share = float64(n) / float64(rowTotal)
			}
			label, hue := cellRole(t, s)
			light := 97 - int(share*52)
			fill := hslHex(float64(hue), 0.65, float64(light)/100)
			ink := "#111"
			if light < 62 {
				ink = "#fff"
			}
			x := left + j*cellW
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#888" stroke-width="1"><title>truth %s, said %s: %d (%.1f%% of row)</title></rect>`+"\n",
				x, y, cellW, cellH, fill, t, s, n, share*100)
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="26" font-weight="bold" text-anchor="middle" fill="%s">%d</text>`+"\n", x+cellW/2, y+42, ink, n)
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle" fill="%s">%.1f%% of row</text>`+"\n", x+cellW/2, y+62, ink, share*100)
			weight := "normal"
			if strings.HasPrefix(label, "UNSAFE") && n > 0 {
				weight = "bold"
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" font-weight="%s" text-anchor="middle" fill="%s">%s</text>`+"\n", x+cellW/2, y+82, weight, ink, label)
		}
	}
	y := top + 2*cellH + 34
	line1 := fmt.Sprintf("accuracy on decided %s (%d/%d) · coverage %s · unsafe-none %d · unsafe-occurred %d",
		pct(m.Accuracy), m.Correct, m.Decided, pct(m.Coverage), m.UnsafeNone, m.UnsafeOccurred)
	line2 := fmt.Sprintf("needs_attention precision %s, recall %s · invalid outputs %d · errored %d",
		pct(m.NeedsAttention.Precision), pct(m.NeedsAttention.Recall), m.InvalidOutputs, m.Errored)
	fmt.Fprintf(&b, `<text x="20" y="%d" font-size="13" fill="#111">%s</text>`+"\n", y, html.EscapeString(line1))
	fmt.Fprintf(&b, `<text x="20" y="%d" font-size="13" fill="#111">%s</text>`+"\n", y+20, html.EscapeString(line2))
	fmt.Fprintf(&b, `<text x="20" y="%d" font-size="11" fill="#666">Shade = share of the truth row. Green: correct · red: unsafe · amber: unknown (abstained) · purple: invalid or errored.</text>`+"\n", y+44)
	fmt.Fprintf(&b, `<text x="20" y="%d" font-size="11" fill="#666">%s</text>`+"\n", y+62, html.EscapeString("run at "+rep.StartedAt.Format("2006-01-02 15:04:05 MST")))
	b.WriteString("</svg>\n")
	return b.String()
}
