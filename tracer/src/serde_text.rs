//! Serde for types whose JSON form is their text: `Display` out, `FromStr` in (times, causes,
//! errnos), so each is written and read back the same way in every record.
/// Serde for types whose JSON form is their text (`Display` out, `FromStr` in).
macro_rules! serde_as_text {
    ($($t:ty),+) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    )+};
}
pub(crate) use serde_as_text;
