package simulate

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one measure of the chart: a bar per policy.
type panel struct {
	title, unit string
	value       func(PolicyResult) float64
}

var panels = []panel{
	{"Deploy success rate", "%", func(r PolicyResult) float64 { return 100 * r.SuccessRate }},
	{"Freshness debt, mean", "intervals", func(r PolicyResult) float64 { return r.Debt.MeanIntervals }},
	{"Debt repair latency, mean", "minutes", func(r PolicyResult) float64 { return r.Debt.RepairLatencyMeanMinutes }},
	{"Extra compute", "intervals beyond the plans", func(r PolicyResult) float64 { return float64(r.ExtraComputeIntervals) }},
	{"Wasted compute", "intervals of failed deploys", func(r PolicyResult) float64 { return float64(r.WastedIntervals) }},
	{"Scheduled work deferred by locks", "minutes, total", func(r PolicyResult) float64 { return r.Deferred.TotalMinutes }},
}

// WriteChart draws r as a PNG: one panel per measure (success rate, mean
// debt, repair latency, extra compute, wasted compute, deferred time),
// each with one bar per policy, labelled with its value.
func (r *Report) WriteChart(w io.Writer) error {
	const cols, rows = 3, 2
	names := make([]string, len(r.Policies))
	for i, p := range r.Policies {
		names[i] = p.Policy
	}
	plots := make([][]*plot.Plot, rows)
	for i, pn := range panels {
		p, err := barPlot(pn, r.Policies, names)
		if err != nil {
			return fmt.Errorf("drawing %q: %w", pn.title, err)
		}
		plots[i/cols] = append(plots[i/cols], p)
	}
	img := vgimg.NewWith(vgimg.UseWH(15*vg.Inch, 8*vg.Inch), vgimg.UseDPI(96))
	dc := draw.New(img)
	title := fmt.Sprintf("gapless simulate: %d deploys, seed %d, dag %s, scheduler every %s, backfill %s %s±%s",
		r.Params.Deploys, r.Params.Seed, r.Params.DAG, r.Params.Cadence, r.Params.BackfillDist, r.Params.BackfillMean, r.Params.BackfillStddev)
	head := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(14)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(head, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Points(8)}, title)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: vg.Points(36), PadBottom: vg.Points(8), PadLeft: vg.Points(8),
		PadRight: vg.Points(16), PadX: vg.Points(24), PadY: vg.Points(24)}
	canvases := plot.Align(plots, tiles, dc)
	for y := range plots {
		for x, p := range plots[y] {
			p.Draw(canvases[y][x])
		}
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	return nil
}

func barPlot(pn panel, results []PolicyResult, names []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.Y.Label.Text = pn.unit
	p.Y.Min = 0
	values := make(plotter.Values, len(results))
	top := 0.0
	for i, r := range results {
		values[i] = pn.value(r)
		top = math.Max(top, values[i])
	}
	for i := range results {
		one := make(plotter.Values, len(results))
		one[i] = values[i]
		bars, err := plotter.NewBarChart(one, vg.Points(28))
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		p.Add(bars)
	}
	// Headroom for the labels; an all-zero panel still gets an axis.
	p.Y.Max = math.Max(top*1.2, 1)
	xys := make(plotter.XYs, len(values))
	labels := make([]string, len(values))
	for i, v := range values {
		xys[i] = plotter.XY{X: float64(i), Y: v}
		labels[i] = num(v)
	}
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].XAlign = draw.XCenter
		lb.TextStyle[i].YAlign = draw.YBottom
	}
	p.Add(lb)
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p, nil
}
