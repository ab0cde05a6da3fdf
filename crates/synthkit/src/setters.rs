//! `setters!`: builder setters that only store their argument and return `self`.
//!
//! Each setter keeps its own doc comment (and doc examples) and its signature; the macro
//! writes the body. Setters that check or change their argument stay hand-written.
//!
//! ```text
//! setters! {
//!     /// Doc comment of the setter.
//!     pub fn with_chat(is_chat: bool) => is_chat;                  // self.is_chat = is_chat
//!     pub fn with_name(name: impl Into<String>) => name;           // self.name = name.into()
//!     pub fn with_counter(counter: SharedCounter) => Some(counter); // self.counter = Some(counter)
//!     pub fn with_title(title: impl Into<String>) => Some(title);  // self.title = Some(title.into())
//!     pub fn with_seed(seed: impl Into<Option<i64>>) => via sampling.with_seed;
//!                                          // self.sampling = self.sampling.with_seed(seed)
//! }
//! ```
//!
//! The field after `=>` may be a path (`sampling.temperature`).

/// Writes builder setters of the forms listed in the module's docs.
macro_rules! setters {
    () => {};
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($arg:ident: $ty:ty) => via $field:ident . $method:ident;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $arg: $ty) -> Self {
            self.$field = self.$field.$method($arg);
            self
        }
        setters!($($rest)*);
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($arg:ident: impl Into<$ty:ty>) => Some($($field:ident).+);
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $arg: impl Into<$ty>) -> Self {
            self.$($field).+ = Some($arg.into());
            self
        }
        setters!($($rest)*);
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($arg:ident: impl Into<$ty:ty>) => $($field:ident).+;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $arg: impl Into<$ty>) -> Self {
            self.$($field).+ = $arg.into();
            self
        }
        setters!($($rest)*);
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($arg:ident: $ty:ty) => Some($($field:ident).+);
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $arg: $ty) -> Self {
            self.$($field).+ = Some($arg);
            self
        }
        setters!($($rest)*);
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($arg:ident: $ty:ty) => $($field:ident).+;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $arg: $ty) -> Self {
            self.$($field).+ = $arg;
            self
        }
        setters!($($rest)*);
    };
}
