package drift

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"sort"
	"strconv"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/mlsysops-go/mlsysops/mlconnector/db"
)

// chartRuns bounds the runs a chart draws (the newest).
const chartRuns = 500

// Chart draws a model's drift statistics over time as a PNG: one line per
// feature and method, drifting points circled, the time of the first and
// last run under the axis.
func (d *Detector) Chart(ctx context.Context, modelID string) ([]byte, error) {
	m, err := d.reg.Model(ctx, modelID)
	if err != nil {
		return nil, err
	}
	type point struct {
		t     time.Time
		v     float64
		drift bool
	}
	series := map[string][]point{}
	err = db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		series = map[string][]point{}
		rows, err := d.pool.Query(ctx, `SELECT r.feature, r.method, r.statistic, r.drift, r.created_at FROM drift_results r
			WHERE r.model_id = $1 AND r.run_id IN (SELECT id FROM drift_runs WHERE model_id = $1 ORDER BY id DESC LIMIT $2)
			ORDER BY r.created_at`, modelID, chartRuns)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f, method string
			var p point
			if err := rows.Scan(&f, &method, &p.v, &p.drift, &p.t); err != nil {
				return err
			}
			key := f + " (" + method + ")"
			series[key] = append(series[key], p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c := newCanvas(900, 480)
	c.text(12, 18, fmt.Sprintf("Drift of model %s (%s): statistic per feature over time", m.ModelName, modelID), colInk)
	x0, y0, x1, y1 := 70, 40, 680, 420 // plot area
	c.rect(x0, y0, x1, y1, colAxis)
	if len(keys) == 0 {
		c.text(x0+20, (y0+y1)/2, "no drift checks yet: POST /v1/models/"+modelID+"/drift", colInk)
		return c.png()
	}
	// Scales: time on x, the statistic on y (symmetric when negative
	// values, such as Welch's t, occur).
	tmin, tmax := series[keys[0]][0].t, series[keys[0]][0].t
	vmin, vmax := 0.0, 0.0
	for _, k := range keys {
		for _, p := range series[k] {
			if p.t.Before(tmin) {
				tmin = p.t
			}
			if p.t.After(tmax) {
				tmax = p.t
			}
			if v := clampStat(p.v); v < vmin {
				vmin = v
			} else if v > vmax {
				vmax = v
			}
		}
	}
	if vmax == vmin {
		vmax = vmin + 1
	}
	pad := (vmax - vmin) * 0.05
	vmin, vmax = vmin-pad, vmax+pad
	span := tmax.Sub(tmin)
	xOf := func(t time.Time) int {
		if span <= 0 {
			return (x0 + x1) / 2
		}
		return x0 + 10 + int(float64(x1-x0-20)*float64(t.Sub(tmin))/float64(span))
	}
	yOf := func(v float64) int { return y1 - int(float64(y1-y0)*(clampStat(v)-vmin)/(vmax-vmin)) }
	// Grid and labels.
	for i := 0; i <= 4; i++ {
		v := vmin + (vmax-vmin)*float64(i)/4
		y := yOf(v)
		c.hline(x0, x1, y, colGrid)
		c.text(4, y+4, strconv.FormatFloat(v, 'g', 3, 64), colInk)
	}
	if vmin < 0 && vmax > 0 {
		c.hline(x0, x1, yOf(0), colAxis)
	}
	c.text(x0, y1+18, tmin.UTC().Format("2006-01-02 15:04:05"), colInk)
	c.text(x1-130, y1+18, tmax.UTC().Format("2006-01-02 15:04:05"), colInk)
	c.text(x0, y1+36, "time (UTC); circles mark drift", colInk)
	for i, k := range keys {
		col := palette[i%len(palette)]
		pts := series[k]
		for j := range pts {
			x, y := xOf(pts[j].t), yOf(pts[j].v)
			if j > 0 {
				c.line(xOf(pts[j-1].t), yOf(pts[j-1].v), x, y, col)
			}
			c.dot(x, y, 2, col)
			if pts[j].drift {
				c.circle(x, y, 5, col)
			}
		}
		ly := y0 + 10 + 18*i
		if ly < y1 {
			c.fill(x1+12, ly-7, x1+24, ly+3, col)
			c.text(x1+30, ly+2, k, colInk)
		}
	}
	return c.png()
}

// clampStat keeps huge statistics (a t of zero variance) drawable.
func clampStat(v float64) float64 { return math.Max(-1e6, math.Min(1e6, v)) }

var (
	colInk  = color.RGBA{0x22, 0x22, 0x22, 0xff}
	colAxis = color.RGBA{0x66, 0x66, 0x66, 0xff}
	colGrid = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	palette = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
		{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	}
)

// canvas is a white RGBA image with the few drawing operations a line
// chart needs.
type canvas struct{ img *image.RGBA }

func newCanvas(w, h int) *canvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	return &canvas{img: img}
}

func (c *canvas) png() ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, c.img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (c *canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func (c *canvas) hline(xa, xb, y int, col color.Color) {
	for x := xa; x <= xb; x++ {
		c.img.Set(x, y, col)
	}
}

func (c *canvas) rect(xa, ya, xb, yb int, col color.Color) {
	c.hline(xa, xb, ya, col)
	c.hline(xa, xb, yb, col)
	for y := ya; y <= yb; y++ {
		c.img.Set(xa, y, col)
		c.img.Set(xb, y, col)
	}
}

func (c *canvas) fill(xa, ya, xb, yb int, col color.Color) {
	draw.Draw(c.img, image.Rect(xa, ya, xb, yb), image.NewUniform(col), image.Point{}, draw.Src)
}

// line draws with Bresenham's algorithm, two pixels thick.
func (c *canvas) line(xa, ya, xb, yb int, col color.Color) {
	dx, dy := abs(xb-xa), -abs(yb-ya)
	sx, sy := sign(xb-xa), sign(yb-ya)
	e := dx + dy
	for {
		c.img.Set(xa, ya, col)
		c.img.Set(xa, ya+1, col)
		if xa == xb && ya == yb {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			xa += sx
		}
		if e2 <= dx {
			e += dx
			ya += sy
		}
	}
}

func (c *canvas) dot(x, y, r int, col color.Color) {
	for dx := -r; dx <= r; dx++ {
		for dy := -r; dy <= r; dy++ {
			if dx*dx+dy*dy <= r*r {
				c.img.Set(x+dx, y+dy, col)
			}
		}
	}
}

func (c *canvas) circle(x, y, r int, col color.Color) {
	for a := 0.0; a < 2*math.Pi; a += 0.05 {
		c.img.Set(x+int(math.Round(float64(r)*math.Cos(a))), y+int(math.Round(float64(r)*math.Sin(a))), col)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
