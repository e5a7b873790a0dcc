//! The default decky image as the fleet uses it: built from the svc binary when the engine lacks
//! it, its digest remembered while the binary stays the same.

use std::path::PathBuf;

use super::{DeployFailure, Fleet};
use crate::runtime::image::DeckyImage;

/// The decky image of a binary, and the binary's size and modification time when it was read.
pub(super) type CachedImage = (PathBuf, Option<(u64, Option<std::time::SystemTime>)>, DeckyImage);

impl Fleet {
    /// The default image's reference, built first when the engine lacks it.
    pub(crate) async fn default_image(&self) -> Result<String, DeployFailure> {
        let binary = match &self.settings.decky_binary {
            Some(path) => path.clone(),
            None => std::env::current_exe().unwrap_or_else(|_| PathBuf::from("svc")),
        };
        let image = self.decky_image(binary).await?;
        image.ensure(self.runtime.as_ref()).await.map_err(|err| {
            tracing::error!(image = image.reference(), error = %err, "Could not build the decky image");
            DeployFailure::unless_away(&err, DeployFailure::Image)
        })?;
        Ok(image.reference().to_string())
    }

    /// The image `binary` makes; its digest (a read of the whole binary, hundreds of MB in a debug
    /// build) is remembered while the file's size and modification time stay the same, so a
    /// mutation does not read it again.
    async fn decky_image(&self, binary: PathBuf) -> Result<DeckyImage, DeployFailure> {
        let stamp = std::fs::metadata(&binary).ok().map(|m| (m.len(), m.modified().ok()));
        let cached = self.image.lock().expect("the image cache lock is never poisoned").clone();
        if let Some((path, seen, image)) = cached
            && path == binary
            && stamp.is_some()
            && seen == stamp
        {
            return Ok(image);
        }
        let path = binary.clone();
        let image = tokio::task::spawn_blocking(move || DeckyImage::for_binary(&path))
            .await
            .map_err(|_| DeployFailure::Image)?
            .map_err(|err| {
                tracing::error!(binary = %binary.display(), error = %err, "Cannot read the binary for the decky image");
                DeployFailure::Image
            })?;
        *self.image.lock().expect("the image cache lock is never poisoned") = Some((binary, stamp, image.clone()));
        Ok(image)
    }
}
