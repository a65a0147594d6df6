//! uraid's engine core (placeholder).
