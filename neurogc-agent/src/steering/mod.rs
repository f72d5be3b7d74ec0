//! advise and act: the model of the collector and the controller (`policy`), the loop's entry
//! point that runs them every window (`steer`), the advice at exit, and the actuator that
//! changes the target (`actuate`).
pub mod actuate;
pub mod advice;
pub mod policy;
pub mod steer;
