//! Image files as image nodes: what `--images` and the model make of the image files
//! a read found.

use std::fs;
use std::path::PathBuf;

use anyhow::Result;
use synthkit::Node;

use crate::error::usage;
use crate::input::read_capped;
use crate::output::{note, warn};
use crate::settings::run::ImageSettings;

/// What `--images` and the model make of the image files found: image nodes (id and
/// `file_path` the path, no text), or none with one note saying why. `vision`: whether
/// the model takes images (`--vision`/`--no-vision`, else its server's word), `model` its
/// name. With `--images on`, a model known to take no images is a usage error, before any
/// call. An image over `--max-image-bytes` is skipped and named; an unreadable one too.
pub fn image_nodes(
    images: &[PathBuf],
    settings: &ImageSettings,
    vision: Option<bool>,
    model: &str,
    quiet: bool,
) -> Result<Vec<Node>> {
    use crate::flags::ImagesMode;
    let Some(first) = images.first() else {
        return Ok(Vec::new());
    };
    let count = match images.len() {
        1 => format!("image file {}", first.display()),
        n => format!("{n} image files"),
    };
    match (settings.mode, vision) {
        (ImagesMode::Off, _) => {
            note(quiet, &format!("skipping {count} (--images off)"));
            return Ok(Vec::new());
        }
        (ImagesMode::Auto, Some(true)) | (ImagesMode::On, Some(true) | None) => {}
        (ImagesMode::Auto, known) => {
            let why = if known == Some(false) {
                "takes no images"
            } else {
                "is not known to take images"
            };
            note(
                quiet,
                &format!(
                    "skipping {count}: the model `{model}` {why} (--images on or --vision sends them)"
                ),
            );
            return Ok(Vec::new());
        }
        (ImagesMode::On, Some(false)) => {
            return Err(usage(format!(
                "--images on, and the {count} cannot go to the model `{model}`: it takes no images (its server says so). Serve a vision model (llama.cpp: --mmproj), leave them out (--images off), or, if the server is wrong, say it takes images (--vision)"
            )));
        }
    }
    let max = settings.max_bytes;
    let mut nodes = Vec::with_capacity(images.len());
    for path in images {
        let shown = path.display().to_string();
        let read = fs::File::open(path).and_then(|f| read_capped(f, Some(max as u64)));
        let bytes = match read {
            Ok(bytes) if bytes.len() > max => {
                warn(&format!(
                    "skipping image {shown}: larger than {max} bytes (--max-image-bytes)"
                ));
                continue;
            }
            Ok(bytes) => bytes,
            Err(e) => {
                warn(&format!("cannot read {shown}: {e}; skipped"));
                continue;
            }
        };
        match synthkit::node::NodeImage::from_bytes(&bytes, None) {
            Ok(image) => nodes.push(
                Node::new(shown.clone(), "")
                    .with_metadata("file_path", shown)
                    .with_image(image),
            ),
            Err(e) => warn(&format!("skipping image {shown}: {e}")),
        }
    }
    Ok(nodes)
}
