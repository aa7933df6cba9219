//! The server study's figure, `server.svg` and `server.png`: per row of the
//! ratio table (workload, tool and, for eviction variants, server) the
//! median ratio dlht-server ÷ memcached as a bar, each round's ratio as a
//! dot on it, a dashed line at parity (1.0) and a short mark at the
//! workload's target.

use super::Ratio;
use crate::compare::plot::{register_font, PALETTE};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// The ratio a workload is to reach, if it has one.
pub(super) fn target(workload: &str) -> Option<f64> {
    match workload {
        w if w.starts_with("get90-") => Some(1.5),
        "multiget16" => Some(2.0),
        "set" => Some(1.0),
        _ => None,
    }
}

/// Draw `ratios` to `server.png` and `server.svg` in `dir`; the files written.
pub(super) fn write(
    dir: &Path,
    ratios: &[Ratio],
    machine: &str,
    threads: usize,
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    if ratios.is_empty() {
        return Err("no ratio to plot".into());
    }
    register_font();
    let size = (120 * ratios.len() as u32 + 160).clamp(900, 1600);
    let size = (size, 600);
    let title = format!("dlht-server ÷ memcached, -t {threads}");
    let png = dir.join("server.png");
    let svg = dir.join("server.svg");
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        draw(&root, ratios, &title, machine)?;
        root.present()?;
    }
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw(&root, ratios, &title, machine)?;
        root.present()?;
    }
    Ok(vec![svg, png])
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ratios: &[Ratio],
    title: &str,
    machine: &str,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (w, _) = root.dim_in_pixel();
    let centre =
        |size: u32| TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    root.draw(&Text::new(title.to_string(), (w as i32 / 2, 10), centre(24)))?;
    root.draw(&Text::new(machine.to_string(), (w as i32 / 2, 40), centre(14)))?;
    let (_, area) = root.split_vertically(64);

    let n = ratios.len();
    let finite = |x: &f64| x.is_finite();
    let top = ratios
        .iter()
        .flat_map(|r| r.per_round.iter().copied().chain([r.median]).chain(target(r.workload)))
        .filter(finite)
        .fold(1.0, f64::max)
        // Headroom for the legend, upper right.
        * 1.5;
    let mut chart = ChartBuilder::on(&area)
        .margin(16)
        .margin_top(4)
        .x_label_area_size(56)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n as f64, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("dlht-server ÷ memcached (throughput)")
        .y_label_formatter(&|y| format!("{y:.1}×"))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;

    // Bars coloured by tool.
    let mut tools: Vec<&str> = Vec::new();
    for r in ratios {
        if !tools.contains(&r.tool) {
            tools.push(r.tool);
        }
    }
    let colour = |tool: &str| {
        let i = tools.iter().position(|t| *t == tool).unwrap_or(0);
        PALETTE[[3, 1, 4, 2, 6][i % 5]]
    };
    for &tool in &tools {
        let c = colour(tool);
        chart
            .draw_series(ratios.iter().enumerate().filter(|(_, r)| r.tool == tool).map(|(i, r)| {
                let x = i as f64;
                Rectangle::new([(x + 0.2, 0.0), (x + 0.8, r.median.clamp(0.0, top))], c.mix(0.75).filled())
            }))?
            .label(format!("median ({tool})"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.mix(0.75).filled()));
    }
    // Each round's ratio.
    chart
        .draw_series(ratios.iter().enumerate().flat_map(|(i, r)| {
            let k = r.per_round.len();
            r.per_round.iter().enumerate().filter(|(_, v)| v.is_finite()).map(move |(j, v)| {
                // Spread the rounds across the bar so that equal ratios stay visible.
                let dx = if k > 1 { 0.4 * j as f64 / (k - 1) as f64 - 0.2 } else { 0.0 };
                Circle::new((i as f64 + 0.5 + dx, v.clamp(0.0, top)), 4, BLACK.filled())
            })
        }))?
        .label("each round")
        .legend(|(x, y)| Circle::new((x + 8, y), 4, BLACK.filled()));
    // Parity.
    chart
        .draw_series(DashedLineSeries::new(vec![(0.0, 1.0), (n as f64, 1.0)], 8, 5, BLACK.stroke_width(1)))?
        .label("parity (1.0)")
        .legend(|(x, y)| plotters::element::DashedPathElement::new(vec![(x, y), (x + 18, y)], 5, 3, BLACK));
    // Targets.
    let red = PALETTE[0];
    chart
        .draw_series(ratios.iter().enumerate().filter_map(|(i, r)| {
            let t = target(r.workload)?;
            let x = i as f64;
            Some(PathElement::new(vec![(x + 0.08, t), (x + 0.92, t)], red.stroke_width(3)))
        }))?
        .label("target")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], red.stroke_width(3)));
    // The median above each bar, the row's names under it.
    let above = TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    let under = TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    let small =
        ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, r) in ratios.iter().enumerate() {
        let x = i as f64 + 0.5;
        let (bx, by) = chart.backend_coord(&(x, r.median.clamp(0.0, top)));
        root.draw(&Text::new(format!("{:.2}×", r.median), (bx, by - 4), above.clone()))?;
        let (lx, ly) = chart.backend_coord(&(x, 0.0));
        root.draw(&Text::new(r.workload.to_string(), (lx, ly + 6), under.clone()))?;
        let sub =
            if r.server == "dlht-server" { r.tool.to_string() } else { format!("{} {}", r.tool, r.server) };
        root.draw(&Text::new(sub, (lx, ly + 24), small.clone()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Ratio;

    fn ratio(workload: &'static str, tool: &'static str, per_round: Vec<f64>) -> Ratio {
        let mut s = per_round.clone();
        s.sort_by(f64::total_cmp);
        Ratio {
            workload,
            tool,
            server: "dlht-server".into(),
            median: s[s.len() / 2],
            per_round,
            p99_memcached_us: Some(100.0),
            p99_server_us: Some(80.0),
            target: "",
            met: None,
        }
    }

    #[test]
    fn the_plot_names_every_workload() {
        let dir = std::env::temp_dir().join(format!("dlht-bench-server-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ratios = [
            ratio("get90-32", "memcaslap", vec![1.4, 1.6, 1.7]),
            ratio("get90-32", "client", vec![1.8, 1.9, 2.0]),
            ratio("multiget16", "client", vec![2.5, 2.4, 2.6]),
            ratio("set", "client", vec![0.9, 1.1, 1.0]),
            ratio("hit-ratio", "client", vec![1.2, 1.3, 1.1]),
        ];
        let files = super::write(&dir, &ratios, "test machine, 4 cores", 2).unwrap();
        assert_eq!(files.len(), 2);
        let svg = std::fs::read_to_string(dir.join("server.svg")).unwrap();
        assert!(dir.join("server.png").exists());
        for w in ["get90-32", "multiget16", "set", "hit-ratio"] {
            assert!(svg.contains(w), "{w} missing from the SVG");
        }
        assert!(svg.contains("-t 2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
