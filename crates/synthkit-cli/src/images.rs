//! Image files as image nodes: what `--images` and the model make of the image files
//! a read found.

use std::fs;
use std::path::PathBuf;

use anyhow::Result;
use synthkit::Node;

use crate::error::usage;
use crate::output::{note, warn};
use crate::settings::run::ImageSettings;
use synthkit_frontend::retrieval::read::read_capped;

/// Who says whether the model takes images: what a hint may claim depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisionWord {
    /// `--vision` or `--no-vision`.
    Flag(bool),
    /// The model's server (llama.cpp's `/props`, a models listing).
    Server(bool),
    /// The offline extractive backend, which reads text only.
    Offline,
    /// Nobody: the server does not say and no flag was given.
    Unknown,
}

impl VisionWord {
    /// The word that counts: a flag over the offline backend over the server.
    pub fn of(flag: Option<bool>, offline: bool, server: Option<bool>) -> Self {
        match (flag, offline, server) {
            (_, true, _) => VisionWord::Offline,
            (Some(v), false, _) => VisionWord::Flag(v),
            (None, false, Some(v)) => VisionWord::Server(v),
            (None, false, None) => VisionWord::Unknown,
        }
    }
}

/// What `--images` and the model make of the image files found: image nodes (id and
/// `file_path` the path, no text), or none with one note saying why. `vision` says who
/// knows whether the model takes images, `model` is its name. With `--images on`, a model
/// known to take no images is a usage error, before any call; the offline backend never
/// takes them (it reads text only). An image over `--max-image-bytes` is skipped and
/// named; an unreadable one too.
pub fn image_nodes(
    images: &[PathBuf],
    settings: &ImageSettings,
    vision: VisionWord,
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
        (ImagesMode::Auto | ImagesMode::On, VisionWord::Offline) => {
            let message = "the offline backend reads text only: a vision model behind --base-url reads images (llama.cpp: --mmproj)";
            if settings.mode == ImagesMode::On {
                return Err(usage(format!(
                    "--images on, and the {count} cannot be read: {message}; or leave them out (--images off)"
                )));
            }
            note(quiet, &format!("skipping {count}: {message}"));
            return Ok(Vec::new());
        }
        (ImagesMode::Auto, VisionWord::Flag(true) | VisionWord::Server(true))
        | (
            ImagesMode::On,
            VisionWord::Flag(true) | VisionWord::Server(true) | VisionWord::Unknown,
        ) => {}
        (ImagesMode::Auto, VisionWord::Flag(false)) => {
            note(
                quiet,
                &format!("skipping {count}: --no-vision says the model `{model}` takes no images"),
            );
            return Ok(Vec::new());
        }
        (ImagesMode::Auto, known) => {
            let why = if known == VisionWord::Server(false) {
                "takes no images (its server says so)"
            } else {
                "is not known to take images (its server does not say)"
            };
            note(
                quiet,
                &format!(
                    "skipping {count}: the model `{model}` {why}; --images on or --vision sends them"
                ),
            );
            return Ok(Vec::new());
        }
        (ImagesMode::On, VisionWord::Flag(false)) => {
            return Err(usage(format!(
                "--images on, and --no-vision says the model `{model}` takes no images: drop one of the two"
            )));
        }
        (ImagesMode::On, VisionWord::Server(false)) => {
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
