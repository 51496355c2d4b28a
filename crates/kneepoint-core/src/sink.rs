//! Where records go as requests finish.

use crate::{Error, RequestRecord};

/// Receives each record as its request finishes. Sinks run off the request path (the runner feeds
/// them from a background task), so a slow disk never delays a request.
pub trait RecordSink: Send {
    /// Stores one record.
    fn record(&mut self, record: &RequestRecord) -> Result<(), Error>;

    /// Makes everything stored so far durable.
    fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// A sink that keeps records in memory (handy for tests and embedding).
#[derive(Debug, Default)]
pub struct VecSink {
    /// The records received, in arrival order.
    pub records: Vec<RequestRecord>,
}

impl RecordSink for VecSink {
    fn record(&mut self, record: &RequestRecord) -> Result<(), Error> {
        self.records.push(record.clone());
        Ok(())
    }
}
