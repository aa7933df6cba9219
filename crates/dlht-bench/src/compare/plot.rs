//! Plots like the paper's figures: throughput vs threads per workload, and
//! the resize time series; each as PNG and SVG (plotters). Text uses a font
//! embedded in the binary (Ubuntu Light, from `epaint_default_fonts`), so
//! no system font is needed.

use crate::compare::report::{Run, Summary};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
];

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// One figure.
enum Plot<'a> {
    /// Throughput vs threads of one workload.
    Threads(String, Vec<&'a Summary>),
    /// Gets over time while the table grows.
    Resize(&'a Run),
}

impl Plot<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        match self {
            Plot::Threads(title, rows) => threads_plot(root, title, rows),
            Plot::Resize(run) => resize_plot(root, run),
        }
    }

    /// Draw to `<stem>.png` and `<stem>.svg` in `dir`.
    fn write(&self, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
        let png = dir.join(format!("{stem}.png"));
        let svg = dir.join(format!("{stem}.svg"));
        {
            let root = BitMapBackend::new(&png, (900, 560)).into_drawing_area();
            root.fill(&WHITE)?;
            self.draw(&root)?;
            root.present()?;
        }
        {
            let root = SVGBackend::new(&svg, (900, 560)).into_drawing_area();
            root.fill(&WHITE)?;
            self.draw(&root)?;
            root.present()?;
        }
        Ok(vec![png, svg])
    }
}

/// Make the embedded font the plots' "sans-serif" (registering twice is
/// harmless; the bytes are 'static).
pub(crate) fn register_font() {
    let _ =
        plotters::style::register_font("sans-serif", FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
}

/// Write every plot of `run` into `dir`; the files written.
pub fn all(run: &Run, dir: &Path) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    register_font();
    let mut files = Vec::new();
    let mut workloads: Vec<&str> = run.summary.iter().map(|r| r.workload.as_str()).collect();
    workloads.sort_unstable();
    workloads.dedup();
    for w in workloads {
        // Lookup workloads are drawn beside the prefetched line-read limit.
        let lookups = ["get", "getmiss", "zipf", "skew"].contains(&w);
        let rows: Vec<&Summary> = run
            .summary
            .iter()
            .filter(|r| r.workload == w || (lookups && r.system == crate::compare::report::LIMIT_PREFETCHED))
            .collect();
        files.extend(
            Plot::Threads(format!("{w}: throughput vs threads"), rows).write(dir, &format!("threads-{w}"))?,
        );
    }
    if run.resize.iter().any(|s| !s.samples.is_empty()) {
        files.extend(Plot::Resize(run).write(dir, "resize-timeseries")?);
    }
    Ok(files)
}

fn threads_plot<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[&Summary],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let max_t = rows.iter().map(|r| r.threads).max().unwrap_or(1).max(2) as u32;
    let max_y = rows.iter().map(|r| r.mops.max).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(1u32..max_t, 0f64..max_y)?;
    chart.configure_mesh().x_desc("threads").y_desc("M ops/s").label_style(("sans-serif", 15)).draw()?;
    let mut systems: Vec<&str> = rows.iter().map(|r| r.system.as_str()).collect();
    systems.dedup();
    systems.sort_unstable();
    systems.dedup();
    for (i, s) in systems.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(u32, f64)> =
            rows.iter().filter(|r| r.system == *s).map(|r| (r.threads as u32, r.mops.median)).collect();
        pts.sort_by_key(|p| p.0);
        let width = if s.starts_with("dlht") { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))?
            .label(*s)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

fn resize_plot<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, run: &Run) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let max_ms = run.resize.iter().flat_map(|s| s.samples.iter().map(|p| p.ms)).max().unwrap_or(1).max(1);
    let max_y =
        run.resize.iter().flat_map(|s| s.samples.iter().map(|p| p.get_mops)).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption("Gets while another thread grows the table (resizing under load)", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0u64..max_ms, 0f64..max_y)?;
    chart.configure_mesh().x_desc("ms").y_desc("gets, M/s").label_style(("sans-serif", 15)).draw()?;
    for (i, s) in run.resize.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let width = if s.system.starts_with("dlht") { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(
                s.samples.iter().map(|p| (p.ms, p.get_mops)),
                color.stroke_width(width),
            ))?
            .label(s.system.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width)));
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
