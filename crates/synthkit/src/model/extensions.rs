//! [`Extensions`]: typed values a caller attaches to a request.

use std::any::{Any, TypeId};
use std::sync::Arc;

/// Typed values attached to a [`super::ModelRequest`], at most one of each type (a small
/// type map, like `http::Extensions`). Cheap to clone: values are shared.
#[derive(Clone, Default)]
pub struct Extensions {
    items: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
}

impl Extensions {
    /// Attaches `value`, replacing a value of the same type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        self.items.retain(|(t, _)| *t != id);
        self.items.push((id, Arc::new(value)));
    }

    /// The value of type `T`, if one is attached.
    pub fn get<T: Any>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.items
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }

    /// How many values are attached.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is attached.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

debug_fields!(Extensions {
    len: items.len(),
    ..
});
