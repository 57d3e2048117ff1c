//! One page of a list, handed over object by object as it is parsed. `Api::list` decodes a whole
//! page into a `Vec` first: 500 EndpointSlices in their API types weigh several MiB, beside the
//! model they go into, and a relist of four kinds at once stacks those pages on top of the cluster
//! model. Here only the page's text and one object at a time are held.
use std::{fmt, marker::PhantomData};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::{Api, Resource, api::ListParams, core::Request};
use serde::{
    Deserialize, Deserializer,
    de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};

/// Requests one page of `api`'s objects and calls `each` on every object of it, in order; the
/// page's `metadata` (its `continue` token and `resourceVersion`). A body that is not such a list,
/// or an object that is not a `K`, fails the page as `Api::list` does (`kube::Error::SerdeError`).
pub async fn list_page<K>(
    api: &Api<K>,
    params: &ListParams,
    each: impl FnMut(K),
) -> Result<ListMeta, kube::Error>
where
    K: Resource + DeserializeOwned + Clone,
{
    let request = Request::new(api.resource_url())
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    let client = api.clone().into_client();
    let text = client.request_text(request).await?;
    decode_page(&text, each).map_err(kube::Error::SerdeError)
}

/// The objects of a `List` body, each handed to `each` as soon as it is parsed; its `metadata`.
/// `items: null` is an empty list, as `kube`'s `ObjectList` reads it.
pub fn decode_page<K: DeserializeOwned>(
    text: &str,
    each: impl FnMut(K),
) -> Result<ListMeta, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let meta = Page {
        each,
        object: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(meta)
}

/// The top-level object: `metadata` kept, `items` streamed, the rest skipped.
struct Page<F, K> {
    each: F,
    object: PhantomData<K>,
}

impl<'de, F: FnMut(K), K: DeserializeOwned> DeserializeSeed<'de> for Page<F, K> {
    type Value = ListMeta;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ListMeta, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, F: FnMut(K), K: DeserializeOwned> Visitor<'de> for Page<F, K> {
    type Value = ListMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes List object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        let mut items = false;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Metadata => meta = map.next_value()?,
                Key::Items => {
                    map.next_value_seed(Items {
                        each: &mut self.each,
                        object: PhantomData,
                    })?;
                    items = true;
                }
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !items {
            return Err(serde::de::Error::missing_field("items"));
        }
        Ok(meta)
    }
}

enum Key {
    Metadata,
    Items,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "metadata" => Key::Metadata,
                    "items" => Key::Items,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// `items`: each element decoded alone and handed over; `null` for none.
struct Items<'f, F, K> {
    each: &'f mut F,
    object: PhantomData<K>,
}

impl<'de, F: FnMut(K), K: DeserializeOwned> DeserializeSeed<'de> for Items<'_, F, K> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, F: FnMut(K), K: DeserializeOwned> Visitor<'de> for Items<'_, F, K> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of Kubernetes objects")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(object) = seq.next_element::<K>()? {
            (self.each)(object);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::{ResourceExt, api::ObjectList};

    use super::*;

    fn names(text: &str) -> Result<(Vec<String>, ListMeta), serde_json::Error> {
        let mut names = Vec::new();
        let meta = decode_page(text, |p: Pod| names.push(p.name_any()))?;
        Ok((names, meta))
    }

    #[test]
    fn hands_over_every_object_in_order_with_the_page_metadata() {
        let text = r#"{"kind":"PodList","apiVersion":"v1",
            "metadata":{"resourceVersion":"42","continue":"next"},
            "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"spec":{"containers":[]}}]}"#;
        let (names, meta) = names(text).expect("page");
        assert_eq!(names, ["a", "b"]);
        assert_eq!(meta.resource_version.as_deref(), Some("42"));
        assert_eq!(meta.continue_.as_deref(), Some("next"));
        // The same objects and metadata as kube's whole-page decoding.
        let whole: ObjectList<Pod> = serde_json::from_str(text).expect("ObjectList");
        let whole_names: Vec<String> = whole.items.iter().map(ResourceExt::name_any).collect();
        assert_eq!(whole_names, names);
        assert_eq!(whole.metadata, meta);
    }

    #[test]
    fn items_null_or_empty_is_no_object_and_metadata_may_come_last() {
        let (none, meta) =
            names(r#"{"items":null,"metadata":{"resourceVersion":"7"}}"#).expect("page");
        assert!(none.is_empty());
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert!(names(r#"{"items":[]}"#).expect("page").0.is_empty());
    }

    #[test]
    fn a_body_that_is_not_a_list_of_such_objects_is_an_error() {
        for bad in [
            r#"{"metadata":{}}"#,
            r#"{"items":{}}"#,
            r#"{"items":[{"metadata":{"name":7}}]}"#,
            r#"{"items":[]} trailing"#,
            r#"{"items":["#,
            "[]",
        ] {
            assert!(names(bad).is_err(), "{bad}");
        }
    }
}
