//! The code lending modules run, walked once per audit: the procedures a
//! text runs (by name in two parts, by one part resolved for the context it
//! runs in, or by a synonym for one, "Synonyms (Database Engine)") and the
//! triggers its writes fire ([`super::lent_triggers`]), at any depth
//! ("Nesting Stored Procedures", "Create Nested Triggers": up to 32
//! levels). Each piece of code runs in a context (whom its statements run
//! as, [`Walk::entries`]), and a state is the code, the context and the
//! part of its text that runs in it; a walk visits a state at most once, so
//! code that calls itself ends, and a state from which a whole walk found
//! nothing is not walked again for that goal. What a state's own statements
//! reach is weighed once.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::{contains_words, executed_unqualified, header_as, normalized, same_name};
use super::super::rules::Context;
use super::as_caller::{caller_part, has_caller_region, lent_part};
use super::call_check::runs;
use super::code::chain_owner;
use super::lent_names::{Statements, resolves_for};
use super::lent_switch::{switched, switched_part};
use super::lent_targets::own;
use super::lent_triggers::{Triggers, triggers, write_passes};
use super::lent_write::{Beside, Lender, Made, body, lenders};
use super::node::Goal;
use super::right::Right;
use super::row_writes::written;
use super::run_time_sql::run_time_sql;
use super::runners::callable;
use super::trigger_header::DATA;
use super::written_through::Through;
use crate::tsql::code_only;

/// One step on a path: its caller's EXEC of `name`, or a write that fires
/// the trigger `name`, and why it passes.
#[derive(Clone)]
pub(super) struct Step {
    pub(super) name: String,
    /// `which maint may EXECUTE`, or for a trigger the write that fires it.
    pub(super) call: String,
    /// The table or view a fired trigger is on.
    pub(super) on: Option<String>,
    pub(super) evidence: String,
    pub(super) cut: String,
    /// The key of the context the step is made in, and whether the code it
    /// reaches keeps it (countersigned).
    pub(super) key: Option<String>,
    pub(super) keeps: bool,
}

/// Which part of a text runs in a context: all of it, or, in a module WITH
/// EXECUTE AS that goes back to its caller ([`super::as_caller`]), the
/// statements that run as the module's principal or those that run as its
/// caller; or, after an EXECUTE AS USER, those that run as that user (a
/// context of the walk, [`super::lent_switch`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Part {
    Whole,
    Lent,
    Caller,
    AsUser(usize),
}

/// How a text reaches a piece of code.
#[derive(Clone, Copy)]
enum Via<'a> {
    /// EXEC by a name in two or three parts.
    Name,
    /// EXEC by one part, which resolves by the context.
    OnePart,
    /// EXEC by a synonym, named in two or three parts or (`true`) in one.
    Synonym(&'a Object, bool),
    /// A write of the verb to the object (the trigger's table, or a
    /// synonym or view for it).
    Write(&'a Object, &'static str),
}

#[derive(Clone, Copy)]
struct Callee<'a> {
    unit: usize,
    via: Via<'a>,
}

type State = (usize, usize, Part);
type Entry = (usize, Part);
/// A unit and the context it is reached with, `None` when its own
/// context replaces any: what its entries depend on.
type Entered = (usize, Option<usize>);
type Runs = Option<(String, String, String)>;
/// A check of a step, by the caller's owner, the callee, how it is reached
/// (kind, object, verb) and the context.
type RunsKey = (Option<String>, usize, (u8, usize, &'static str), usize);

/// A walk in progress: the callees of one state.
struct Frame<'a> {
    owner: Option<String>,
    lender: usize,
    callees: Rc<Vec<Callee<'a>>>,
    next: usize,
    /// The callee being descended into, with its entries left to try.
    current: Option<(usize, Step, Rc<Vec<Entry>>, usize)>,
    step: Option<Step>,
}

pub(super) struct Walk<'a> {
    /// The code a text may reach: callable procedures with a text, and
    /// enabled DML triggers outside the shipped code.
    units: Vec<&'a Object>,
    /// Each procedure's name, normalized, as a text names it.
    names: Vec<Option<String>>,
    /// Synonyms for procedures: synonym, procedure, normalized name.
    synonyms: Vec<(&'a Object, usize, String)>,
    triggers: Triggers<'a>,
    /// The contexts met, each once (by principal and key).
    lenders: Vec<Lender>,
    /// Where each context stands in `lenders`, by principal (lower-cased),
    /// key and whose context a signature's rights are added to.
    lender_index: HashMap<(String, Option<String>, Beside), usize>,
    callees: HashMap<(usize, Part), Rc<Vec<Callee<'a>>>>,
    /// A unit's own contexts, whether it switches context, and whether its
    /// text goes back to its caller's.
    own: HashMap<usize, (Vec<usize>, bool, bool)>,
    /// [`Walk::entries`]' answers, by unit and the context it is reached
    /// with (`None` for a unit whose own context replaces any).
    entries: HashMap<Entered, (Rc<Vec<Entry>>, bool, Entered)>,
    switches: HashMap<(usize, usize), Vec<usize>>,
    runs: HashMap<RunsKey, Runs>,
    reached: HashMap<(usize, Goal, usize, Part), Option<Made>>,
    /// States from which a whole walk reached nothing, by goal.
    dead: HashSet<(Goal, State)>,
    /// Code entered so, each of whose entries a whole walk followed and
    /// reached nothing from, by goal.
    dead_entries: HashSet<(Goal, Entered)>,
}

impl<'a> Walk<'a> {
    pub(super) fn new(ctx: &Context<'a>) -> Self {
        let units: Vec<&'a Object> = ctx
            .catalog
            .objects
            .iter()
            .filter(|o| match o.kind {
                ObjectKind::Procedure => callable(ctx, o),
                ObjectKind::Trigger => !o.disabled && callable(ctx, o),
                _ => false,
            })
            .filter(|o| body(o).is_some())
            .collect();
        let names: Vec<Option<String>> = units
            .iter()
            .map(|p| (p.kind == ObjectKind::Procedure).then(|| normalized(&p.qualified_name())))
            .collect();
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((n.as_deref()?, i)))
            .collect();
        let here = format!("{}.", normalized(&ctx.catalog.database));
        let synonyms = ctx
            .catalog
            .objects
            .iter()
            .filter(|s| s.kind == ObjectKind::Synonym && callable(ctx, s))
            .filter_map(|s| {
                let base = normalized(&code_only(s.definition.as_deref()?));
                let base = base.strip_prefix(&here).unwrap_or(&base);
                let p = *index.get(base)?;
                Some((s, p, normalized(&s.qualified_name())))
            })
            .collect();
        let triggers = triggers(ctx, &units);
        Walk {
            units,
            names,
            synonyms,
            triggers,
            lenders: Vec::new(),
            lender_index: HashMap::new(),
            callees: HashMap::new(),
            own: HashMap::new(),
            entries: HashMap::new(),
            switches: HashMap::new(),
            runs: HashMap::new(),
            reached: HashMap::new(),
            dead: HashSet::new(),
            dead_entries: HashSet::new(),
        }
    }

    /// The steps from `m` (whose statements are `text`), run with
    /// `lender`, to the first code whose statements reach the goal, and
    /// what they make there.
    pub(super) fn path(
        &mut self,
        ctx: &Context<'a>,
        rights: &[Right],
        to: (Goal, &[Through]),
        m: &'a Object,
        text: &str,
        lender: &Lender,
    ) -> Option<(Vec<Step>, Made)> {
        let first = self.intern(lender);
        let own = lenders(ctx, m)
            .iter()
            .any(|o| o.key.is_none() && o.principal.eq_ignore_ascii_case(&lender.principal));
        let part = match (&lender.key, own) {
            (Some(_), _) => Part::Whole,
            (None, true) => Part::Lent,
            (None, false) => Part::AsUser(first),
        };
        let mut visited: HashSet<State> = HashSet::new();
        // The module itself, in the context it lends, is the walk's start:
        // what it makes there is its own text's. Run again in another
        // context, it is walked as any code.
        let callees = match self.units.iter().position(|u| std::ptr::eq(*u, m)) {
            Some(s) => {
                visited.insert((s, first, part));
                self.callees(ctx, s, part)
            }
            None => Rc::new(self.callees_in(ctx, m, text)),
        };
        let mut entered: HashSet<Entered> = HashSet::new();
        let found = self.search(
            ctx,
            rights,
            to,
            (&mut visited, &mut entered),
            (chain_owner(ctx, m), first, callees),
        );
        if found.is_none() {
            self.dead.extend(visited.into_iter().map(|s| (to.0, s)));
            self.dead_entries.extend(entered.into_iter().map(|e| (to.0, e)));
        }
        found
    }

    fn search(
        &mut self,
        ctx: &Context<'a>,
        rights: &[Right],
        to: (Goal, &[Through]),
        (visited, entered): (&mut HashSet<State>, &mut HashSet<Entered>),
        (owner, first, callees): (Option<&str>, usize, Rc<Vec<Callee<'a>>>),
    ) -> Option<(Vec<Step>, Made)> {
        let mut stack = vec![Frame {
            owner: owner.map(str::to_string),
            lender: first,
            callees,
            next: 0,
            current: None,
            step: None,
        }];
        while let Some(f) = stack.last_mut() {
            if let Some((p, step, entries, j)) = &mut f.current {
                let Some(&(c, part)) = entries.get(*j) else {
                    f.current = None;
                    continue;
                };
                *j += 1;
                let (p, step) = (*p, step.clone());
                let state = (p, c, part);
                if !self.dead.contains(&(to.0, state)) && visited.insert(state) {
                    let callees = self.callees(ctx, p, part);
                    stack.push(Frame {
                        owner: chain_owner(ctx, self.units[p]).map(str::to_string),
                        lender: c,
                        callees,
                        next: 0,
                        current: None,
                        step: Some(step),
                    });
                }
                continue;
            }
            let Some(&callee) = f.callees.get(f.next) else {
                stack.pop();
                continue;
            };
            f.next += 1;
            let (owner, l) = (f.owner.clone(), f.lender);
            let Some((call, evidence, cut)) = self.runs(ctx, rights, owner, callee, l) else {
                continue;
            };
            let (entries, keeps, key) = self.entries(ctx, rights, callee.unit, l);
            // Entered before in this walk, its entries are followed there;
            // in a whole walk that reached nothing, they lead nowhere.
            if entered.contains(&key) || self.dead_entries.contains(&(to.0, key)) {
                continue;
            }
            let unit = self.units[callee.unit];
            let step = Step {
                name: unit.qualified_name(),
                call,
                on: matches!(callee.via, Via::Write(..)).then(|| unit.parent.clone().unwrap_or_default()),
                evidence,
                cut,
                key: self.lenders[l].key.clone(),
                keeps,
            };
            let made = entries
                .iter()
                .find_map(|&(c, part)| self.reached(ctx, rights, to, callee.unit, c, part));
            if let Some(made) = made {
                let mut steps: Vec<Step> = stack.iter().filter_map(|f| f.step.clone()).collect();
                steps.push(step);
                return Some((steps, made));
            }
            entered.insert(key);
            if let Some(f) = stack.last_mut() {
                f.current = Some((callee.unit, step, entries, 0));
            }
        }
        None
    }

    fn intern(&mut self, l: &Lender) -> usize {
        let id = (l.principal.to_lowercase(), l.key.clone(), l.beside.clone());
        if let Some(&i) = self.lender_index.get(&id) {
            return i;
        }
        self.lender_index.insert(id, self.lenders.len());
        self.lenders.push(l.clone());
        self.lenders.len() - 1
    }

    /// The procedures `text` (`m`'s) runs, by name or by a synonym, in the
    /// catalog's order, then the triggers its writes fire.
    fn callees_in(&self, ctx: &Context, m: &Object, text: &str) -> Vec<Callee<'a>> {
        let code = normalized(&code_only(text));
        // A procedure's header names the procedure itself, which is no call
        // (a trigger's statements come without theirs).
        let code = match header_as(&code) {
            Some(at) if m.kind == ObjectKind::Procedure && code.trim_start().starts_with("create") => &code[at..],
            _ => &code[..],
        };
        let one_part = executed_unqualified(text);
        let mut out: Vec<Callee<'a>> = Vec::new();
        for (unit, name) in self.names.iter().enumerate() {
            let Some(name) = name else { continue };
            if contains_words(code, name) {
                out.push(Callee { unit, via: Via::Name });
            } else if one_part.iter().any(|e| same_name(e, &self.units[unit].name)) {
                out.push(Callee {
                    unit,
                    via: Via::OnePart,
                });
            }
        }
        out.extend(self.synonyms.iter().filter_map(|&(s, unit, ref n)| {
            let one = if contains_words(code, n) {
                false
            } else if one_part.iter().any(|e| same_name(e, &s.name)) {
                true
            } else {
                return None;
            };
            Some(Callee {
                unit,
                via: Via::Synonym(s, one),
            })
        }));
        let verbs: Vec<&'static str> = written(text, &run_time_sql(text).constant)
            .into_iter()
            .filter(|v| DATA.contains(v))
            .collect();
        if !verbs.is_empty() {
            let statements = Statements::new(ctx, m, text);
            out.extend(self.triggers.list.iter().filter_map(|(unit, t)| {
                let (named, verb) = self.triggers.fired_by(ctx, t, (m, &statements), &verbs)?;
                Some(Callee {
                    unit: *unit,
                    via: Via::Write(named, verb),
                })
            }));
        }
        out
    }

    fn callees(&mut self, ctx: &Context, p: usize, part: Part) -> Rc<Vec<Callee<'a>>> {
        if let Some(c) = self.callees.get(&(p, part)) {
            return c.clone();
        }
        let o = self.units[p];
        let c = Rc::new(
            body(o)
                .map(|b| self.callees_in(ctx, o, &text_of(b, part, &self.lenders)))
                .unwrap_or_default(),
        );
        self.callees.insert((p, part), c.clone());
        c
    }

    /// Whether `callee` runs from code owned by `owner` run with `l`: an
    /// EXEC (by a synonym, checked on the synonym or chained to it, then on
    /// the procedure unless the synonym has its owner; by one part, when
    /// the name resolves to it in that context), or a write that fires it.
    fn runs(&mut self, ctx: &Context, rights: &[Right], owner: Option<String>, callee: Callee, l: usize) -> Runs {
        let via = match callee.via {
            Via::Name => (0, 0, ""),
            Via::OnePart => (1, 0, ""),
            Via::Synonym(s, one) => (2 + u8::from(one), s as *const Object as usize, ""),
            Via::Write(o, v) => (4, o as *const Object as usize, v),
        };
        let key = (owner.map(|o| o.to_lowercase()), callee.unit, via, l);
        if let Some(r) = self.runs.get(&key) {
            return r.clone();
        }
        let p = self.units[callee.unit];
        let lender = &self.lenders[l];
        let owner = key.0.as_deref();
        let r = match callee.via {
            Via::Name => runs(ctx, rights, owner, p, lender),
            Via::OnePart => {
                let user = lender.key.is_none().then_some(lender.principal.as_str());
                if resolves_for(ctx, user, &p.schema, &p.name) {
                    runs(ctx, rights, owner, p, lender)
                } else {
                    None
                }
            }
            Via::Synonym(s, one)
                if one
                    && !resolves_for(
                        ctx,
                        lender.key.is_none().then_some(lender.principal.as_str()),
                        &s.schema,
                        &s.name,
                    ) =>
            {
                None
            }
            Via::Synonym(s, _) => runs(ctx, rights, owner, s, lender).and_then(|(call, evidence, cut)| {
                let (then, base_evidence, base_cut) = runs(ctx, rights, ctx.catalog.owner_of(s), p, lender)?;
                let (syn, name) = (s.qualified_name(), p.qualified_name());
                Some((
                    format!("by the synonym {syn}, {call}; then {name} itself, {then}"),
                    format!("{evidence}; sys.synonyms: {syn} is for {name}; {base_evidence}"),
                    format!("{cut} (or {base_cut})"),
                ))
            }),
            Via::Write(named, verb) => {
                let on = p.parent.as_deref().and_then(|n| ctx.catalog.object(n));
                on.and_then(|on| write_passes(ctx, rights, owner, (named, on), verb, lender))
            }
        };
        self.runs.insert(key, r.clone());
        r
    }

    /// The contexts `p`'s statements run with when reached with `l`, each
    /// with the part of its text that runs so: its own EXECUTE AS or
    /// signatures, and `l` unless an EXECUTE AS of its own replaces it (a
    /// signature's rights carry only into code countersigned with its key);
    /// in code WITH EXECUTE AS, the statements after an EXECUTE AS CALLER
    /// run with `l` again. An EXECUTE AS USER in the text adds the user a
    /// context may impersonate, for the statements that may run as that
    /// user ([`super::lent_switch`]). Whether `l`'s signature is kept, and
    /// what the answer depends on.
    fn entries(&mut self, ctx: &Context, rights: &[Right], p: usize, l: usize) -> (Rc<Vec<Entry>>, bool, Entered) {
        if !self.own.contains_key(&p) {
            let o = self.units[p];
            let own = lenders(ctx, o);
            let switches = own.iter().any(|x| x.key.is_none());
            let back = switches && body(o).is_some_and(has_caller_region);
            let ids = own.iter().map(|x| self.intern(x)).collect();
            self.own.insert(p, (ids, switches, back));
        }
        let (ids, switches, back) = self.own[&p].clone();
        // Code whose own context replaces its caller's for all of its text
        // runs alike whoever reaches it: a thousand users switched to
        // before it share one answer.
        let key = (p, (!switches || back).then_some(l));
        if let Some(known) = self.entries.get(&key) {
            return known.clone();
        }
        let mut out = Vec::new();
        let keeps = if switches {
            if back {
                out.push((l, Part::Caller));
            }
            out.extend(ids.iter().map(|&i| (i, Part::Lent)));
            false
        } else {
            let keeps = self.lenders[l].key.as_ref().is_none_or(|k| {
                self.units[p]
                    .counter_signed_by
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(k))
            });
            if keeps {
                out.push((l, Part::Whole));
            }
            // Its signatures add to the context it is reached in.
            let signed: Vec<usize> = ids
                .iter()
                .map(|&i| {
                    let beside = self.lenders[i].beside_of(&self.lenders[l]);
                    let reached = Lender {
                        beside,
                        ..self.lenders[i].clone()
                    };
                    self.intern(&reached)
                })
                .collect();
            out.extend(
                signed
                    .into_iter()
                    .filter(|&i| !keeps || i != l)
                    .map(|i| (i, Part::Whole)),
            );
            keeps && self.lenders[l].key.is_some()
        };
        let mut added = HashSet::new();
        for (c, _) in out.clone() {
            for x in self.switched(ctx, rights, p, c) {
                if added.insert(x) {
                    out.push((x, Part::AsUser(x)));
                }
            }
        }
        let answer = (Rc::new(out), keeps, key);
        self.entries.insert(key, answer.clone());
        answer
    }

    fn switched(&mut self, ctx: &Context, rights: &[Right], p: usize, c: usize) -> Vec<usize> {
        if let Some(s) = self.switches.get(&(p, c)) {
            return s.clone();
        }
        let found = body(self.units[p]).map_or_else(Vec::new, |b| switched(ctx, rights, b, &self.lenders[c]));
        let ids: Vec<usize> = found.iter().map(|x| self.intern(x)).collect();
        self.switches.insert((p, c), ids.clone());
        ids
    }

    /// What `p`'s own statements of `part` reach with `c`, or by a chain
    /// from its owner.
    fn reached(
        &mut self,
        ctx: &Context,
        rights: &[Right],
        to: (Goal, &[Through]),
        p: usize,
        c: usize,
        part: Part,
    ) -> Option<Made> {
        let key = (p, to.0, c, part);
        if let Some(r) = self.reached.get(&key) {
            return r.clone();
        }
        let o = self.units[p];
        let r = body(o).and_then(|b| {
            let text = text_of(b, part, &self.lenders);
            own(ctx, rights, to, o, &text, &[&self.lenders[c]], chain_owner(ctx, o))
        });
        self.reached.insert(key, r.clone());
        r
    }
}

fn text_of<'b>(body: &'b str, part: Part, lenders: &[Lender]) -> Cow<'b, str> {
    match part {
        Part::Whole => Cow::Borrowed(body),
        Part::Lent => lent_part(body),
        Part::Caller => Cow::Owned(caller_part(body)),
        Part::AsUser(u) => Cow::Owned(switched_part(body, &lenders[u].principal)),
    }
}
